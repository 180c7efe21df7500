"""`loopstate replay` and the bundled demo cassette."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from loopstate import demo
from loopstate.engine.recording.cassette import Cassette

BUNDLED = Path(demo.__file__).with_name("data") / "demo.jsonl"


def loopstate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopstate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_replay_prints_the_run_and_exits_0_when_it_replays_cleanly(tmp_path: Path) -> None:
    out = loopstate("replay", str(BUNDLED), "--diagram", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "[ 6] thinking → awaiting_approval (replied)" in out.stdout
    assert "[approve] → succeeded" in out.stdout
    assert "(replayed cleanly)" in out.stdout
    assert "executing_tool --> thinking : tools_done ×3" in out.stdout


def test_replay_against_a_changed_agent_exits_1_with_the_divergence(tmp_path: Path) -> None:
    (tmp_path / "changed.py").write_text(
        "from pathlib import Path\n"
        "from loopstate import demo\n"
        "agent = demo.build_agent(Path('.')).clone(instructions='Be terse.')\n"
    )
    out = loopstate("replay", str(BUNDLED), "--agent", "changed:agent", cwd=tmp_path)
    assert out.returncode == 1
    assert "replay diverged at step 1: the request differs" in out.stderr
    assert '+      "content": "Be terse.",' in out.stderr


def test_replay_of_a_file_that_is_not_a_cassette_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text('{"kind": "model"}\n')
    out = loopstate("replay", "x.jsonl", cwd=tmp_path)
    assert out.returncode == 2
    assert "has no header line: not a loopstate cassette" in out.stderr


def test_the_bundled_demo_cassette_matches_the_demo_scenario(tmp_path: Path) -> None:
    fresh = tmp_path / "demo.jsonl"
    asyncio.run(demo.record(fresh))

    def turns(path: Path) -> list[tuple[str, str]]:
        tape = Cassette.load(path)
        return [(t["digest"], json.dumps(t["response"], sort_keys=True))
                for t in tape.model_turns().values()]  # fmt: skip

    assert turns(fresh) == turns(BUNDLED), "re-record: python -m loopstate.demo"
