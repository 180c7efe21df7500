"""A coaching run recorded across its pauses replays with no network and no side effects."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from flow_child import happy_script

from loopstate import Approve, MemoryStore, ScriptedModel
from loopstate.engine.recording.recorder import Recorder
from loopstate.engine.recording.replay import ReplayDivergence
from loopstate.machines.coaching import coaching_flow
from loopstate.replay import replay_flow


def flow(model: ScriptedModel, **options: object):
    models = {p: model for p in ("default", "analyst", "plan")}
    return coaching_flow(models=models, store=MemoryStore(), **options)  # type: ignore[arg-type]


async def record(tape: Path):
    recording = flow(ScriptedModel(happy_script()), hooks=[Recorder(tape)])
    first = await recording.run("I want to run a 4:25 1500m")
    second = await recording.resume(
        first.run_id, message="43, 70 km a week, 5 days, a stress fracture last year"
    )
    third = await recording.resume(first.run_id, decisions={second.pending[0].call_id: Approve()})
    return await recording.resume(third.run_id, message="Looks great!")


async def test_a_recorded_coaching_run_replays_to_the_same_phases_data_and_output(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "coaching.jsonl"
    recorded = await record(tape)
    assert recorded.status == "done"
    replayed = await replay_flow(tape, flow(ScriptedModel([])))  # an empty script: no model
    assert (replayed.status, replayed.phase) == ("done", "done")
    assert replayed.data == recorded.data
    assert [(t.source, t.target, t.event) for t in replayed.transitions] == [
        (t.source, t.target, t.event) for t in recorded.transitions
    ]


async def test_a_flow_whose_instructions_changed_diverges_with_a_diff(tmp_path: Path) -> None:
    tape = tmp_path / "coaching.jsonl"
    await record(tape)
    base = flow(ScriptedModel([]))
    phases = {name: bound.spec for name, bound in base.phases.items()}
    phases["intake"] = replace(phases["intake"], instructions="Ask one thing at a time.")
    with pytest.raises(ReplayDivergence) as caught:
        await replay_flow(tape, base.clone(phases=phases))
    assert "the request differs from the recording" in str(caught.value)
    assert '+      "content": "Ask one thing at a time.",' in str(caught.value)
