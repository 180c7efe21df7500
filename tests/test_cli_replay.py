"""`loopstate replay`: the bundled demo cassette, and a recorded flow run replayed against its
flow and drawn on the flow's machine."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from flow_child import happy_script
from support.cli import loopstate

from loopstate import Approve, MemoryStore, ScriptedModel, demo
from loopstate.engine.recording.cassette import Cassette
from loopstate.engine.recording.recorder import Recorder
from loopstate.machines.coaching import coaching_flow

BUNDLED = Path(demo.__file__).with_name("data") / "demo.jsonl"


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
    second = await flow.resume(
        first.run_id, message="43, 70 km a week, 5 days, a stress fracture last year"
    )
    await flow.resume(first.run_id, decisions={second.pending[0].call_id: Approve()})
    await flow.resume(first.run_id, message="Looks great!")


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
