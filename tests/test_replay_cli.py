"""`loopstate replay` of a recorded flow run: against the flow, drawn on the flow's machine."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from flow_child import happy_script

from loopstate import Approve, MemoryStore, ScriptedModel
from loopstate.engine.recording.cassette import Cassette
from loopstate.engine.recording.recorder import Recorder
from loopstate.machines.coaching import coaching_flow

FLOW_MODULE = """
from loopstate import MemoryStore, ScriptedModel
from loopstate.machines.coaching import coaching_flow

flow = coaching_flow(models={p: ScriptedModel([]) for p in ("default", "analyst", "plan")},
                     store=MemoryStore())
"""


async def record(tape: Path) -> None:
    model = ScriptedModel(happy_script())
    models = {p: model for p in ("default", "analyst", "plan")}
    flow = coaching_flow(models=models, store=MemoryStore(), hooks=[Recorder(tape)])  # type: ignore[arg-type]
    first = await flow.run("I want to run a 4:25 1500m")
    second = await flow.resume(first.run_id, message="43, 40 km a week, no injuries")
    await flow.resume(first.run_id, decisions={second.pending[0].call_id: Approve()})
    await flow.resume(first.run_id, message="Looks great!")


def loopstate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopstate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_flow_cassette_replays_against_its_flow_and_is_drawn_on_the_flow(
    tmp_path: Path,
) -> None:
    asyncio.run(record(tmp_path / "coaching.jsonl"))
    machine = Cassette.load(tmp_path / "coaching.jsonl").of_kind("run")[0]["machine"]
    (tmp_path / "flows_here.py").write_text(FLOW_MODULE)
    out = loopstate("replay", "coaching.jsonl", "--agent", "flows_here:flow", "--diagram",
                    cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "(replayed cleanly)" in out.stdout
    assert "[20] awaiting_approval → executing_tool (decided)" in out.stdout
    assert "goal_capture --> analyst : advance [goal_set] ×1" in out.stdout  # the flow's graph
    assert machine == "coaching"


def test_a_flow_cassette_without_its_flow_is_a_clear_error(tmp_path: Path) -> None:
    asyncio.run(record(tmp_path / "coaching.jsonl"))
    out = loopstate("replay", "coaching.jsonl", cwd=tmp_path)
    assert out.returncode == 2
    assert "records a coaching run: replay it with --agent module:attr" in out.stderr
