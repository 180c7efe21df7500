"""Replaying with the agent's live approver tests a changed approval policy; the recorded
decisions (the default) do not. A divergence carries no engine frames."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from loopstate import Agent, Approve, Deny, MemoryStore, Recorder, ScriptedModel, replay, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.recording.replay import ReplayDivergence


@tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


async def approve(requests: list) -> dict:  # type: ignore[type-arg]
    return {r.call_id: Approve() for r in requests}


async def deny(requests: list) -> dict:  # type: ignore[type-arg]
    return {r.call_id: Deny("no refunds today") for r in requests}


def shop(approver: object) -> Agent:
    script = ScriptedModel([call("refund", {"order": "A1"}), "Refunded."])
    return Agent(script, [refund], approver=approver, store=MemoryStore())  # type: ignore[arg-type]


async def recorded(tmp_path: Path) -> Path:
    tape = tmp_path / "refund.jsonl"
    result = await shop(approve).clone(hooks=[Recorder(tape)]).run("refund A1")
    assert result.status == "done"
    return tape


async def test_the_recorded_decisions_replay_green_even_under_a_changed_policy(
    tmp_path: Path,
) -> None:
    tape = await recorded(tmp_path)
    assert (await replay(tape, shop(deny))).output == "Refunded."


async def test_the_live_approver_replays_the_same_policy_green_and_catches_a_changed_one(
    tmp_path: Path,
) -> None:
    tape = await recorded(tmp_path)
    assert (await replay(tape, shop(approve), live_approver=True)).output == "Refunded."
    with pytest.raises(ReplayDivergence, match="replay diverged at step 2") as raised:
        await replay(tape, shop(deny), live_approver=True)
    assert "no refunds today" in str(raised.value)
    frames = traceback.extract_tb(raised.value.__traceback__)
    assert all("machines" not in f.filename for f in frames), [f.filename for f in frames]
