"""The worked pipeline example runs offline, as its docstring says."""

from __future__ import annotations

import sys
from pathlib import Path

from support import forking

EXAMPLE = Path(__file__).parent.parent / "examples" / "gauntlet.py"


def test_the_gauntlet_example_runs_offline_through_two_rounds(tmp_path: Path) -> None:
    done = forking.run(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "done after 2 round(s)" in lines
    assert "  style_review → write (gate: style_rejected and rounds_left)" in lines
    assert "  fact_review → done (gate: facts_passed)" in lines
    assert sum(line.startswith("  approving write note.md") for line in lines) == 2
    children = [line.split()[2] for line in lines if line.startswith("  child run")]
    assert children == [
        "gauntlet-1.fact_review.1:",
        "gauntlet-1.style_review.1:",
        "gauntlet-1.style_review.2:",
        "gauntlet-1.write.1:",
        "gauntlet-1.write.2:",
    ]
    assert list(tmp_path.iterdir()) == []  # a MemoryStore and a temporary workspace
