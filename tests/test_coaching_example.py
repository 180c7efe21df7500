"""The offline coaching example runs as its docstring says: the reframe, the flagged plan
approved by a boolean answer, the phases printed as the stream enters them."""

from __future__ import annotations

import sys
from pathlib import Path

from support import forking

EXAMPLE = Path(__file__).parent.parent / "examples" / "coaching.py"


def test_the_coaching_example_runs_the_seeds_journey_offline(tmp_path: Path) -> None:
    done = forking.run(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    phases = [line.strip() for line in lines if line.startswith("  phase ")]
    assert phases == [
        "phase - → goal_capture",
        "phase goal_capture → analyst",
        "phase analyst → goal_capture",  # the implicit reframe
        "phase goal_capture → analyst",
        "phase analyst → intake",
        "phase intake → safety",
        "phase safety → plan",
        "phase plan → present",
        "phase present → done",
    ]
    asked = lines.index("  asks a person: generate_plan (safety flags: stress_fracture_volume: "
                        "History of stress fractures with high volume - recommend medical "
                        "clearance.)")  # fmt: skip
    assert lines[asked + 1] == "  approved by approver"
    assert "safety: approved_with_warnings, flags: ['stress_fracture_volume']" in lines
    assert "goal: a 4:25 1500m that I can keep running for years" in lines
    assert lines[-4] == "  done: Here is your 8-week block: speed with room to recover."
    assert list(tmp_path.iterdir()) == []  # a MemoryStore: nothing written
