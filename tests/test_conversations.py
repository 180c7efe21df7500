"""Conversations: a run that answered goes on with the user's next message — same run id,
history appended and stored once, audit trail continued, in any process; a message may
accompany decisions; each turn has its own step budget."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support import charge

from loopstate import Agent, Approve, MemoryStore, RunNotResumable, ScriptedModel, tool
from loopstate.engine.model import ModelRequest
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.stores.sqlite import SQLiteStore


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def said(request: ModelRequest) -> str:
    """A reply naming every user and tool message the model was shown, in order."""
    return " / ".join(f"{m.role}:{m.content}" for m in request.messages if m.role != "assistant")


async def test_a_run_that_answered_goes_on_with_the_users_next_message() -> None:
    model = ScriptedModel(["Paris.", said])
    agent = Agent(model, instructions="Be brief.", store=MemoryStore())
    first = await agent.run("Capital of France?")
    assert (first.status, first.output) == ("done", "Paris.")

    second = await agent.resume(first.run_id, message="And of Italy?")

    assert (second.run_id, second.status, second.stop_reason) == (first.run_id, "done", "answer")
    assert second.output == "system:Be brief. / user:Capital of France? / user:And of Italy?"
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert [(t.source, t.target, t.event, t.actor) for t in second.transitions[-2:]] == [
        ("done", "thinking", "user_message", "user"),
        ("thinking", "done", "replied", None),
    ]
    assert [t.seq for t in second.transitions] == list(range(1, len(second.transitions) + 1))
    assert second.steps == 2


async def test_the_history_is_stored_once_and_continued_by_another_store_object(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    script = ["one", call("lookup", {"key": "k"}), said]
    first = await Agent(ScriptedModel(script, by_step=True), [lookup], store=SQLiteStore(path)).run(
        "hi"
    )
    other = Agent(ScriptedModel(script, by_step=True), [lookup], store=SQLiteStore(path))
    result = await other.resume(first.run_id, message="look k up")
    assert result.output == "user:hi / user:look k up / tool:value of k"
    db = sqlite3.connect(path)
    rows = db.execute("SELECT COUNT(*) FROM messages WHERE run_id = ?", (first.run_id,)).fetchone()
    assert rows[0] == len(result.messages) == 6
    stored = await SQLiteStore(path).load(first.run_id)
    assert stored.messages == result.messages
    assert stored.transitions == result.transitions


async def test_each_turn_has_its_own_step_budget() -> None:
    turn = [call("lookup", {"key": "a"}), "found a"]
    agent = Agent(ScriptedModel([*turn, *turn, *turn]), [lookup], max_steps=2, store=MemoryStore())
    result = await agent.run("find a")
    for _ in range(2):
        result = await agent.resume(result.run_id, message="again")
    assert (result.status, result.stop_reason, result.output, result.steps) == (
        "done",
        "answer",
        "found a",
        6,
    )


async def test_a_message_accompanying_decisions_follows_the_batchs_results() -> None:
    model = ScriptedModel([call("charge", {"amount": 5}), said])
    agent = Agent(model, [charge], store=MemoryStore())
    suspended = await agent.run("charge 5")
    call_id = suspended.pending[0].call_id

    result = await agent.resume(
        suspended.run_id, {call_id: Approve()}, message="then tell me the total"
    )

    assert result.output == "user:charge 5 / tool:charged 5 / user:then tell me the total"
    assert result.status == "done"


async def test_a_message_waits_with_the_run_when_decisions_leave_a_call_pending() -> None:
    model = ScriptedModel(
        [calls(call("charge", {"amount": 5}), call("charge", {"amount": 7})), said]
    )
    store = MemoryStore()
    agent = Agent(model, [charge], store=store)
    suspended = await agent.run("charge both")
    first, second = (p.call_id for p in suspended.pending)

    waiting = await agent.resume(suspended.run_id, {first: Approve()}, message="sum them")
    assert waiting.status == "awaiting_approval"
    assert (await store.load(suspended.run_id)).queued_message == "sum them"

    result = await agent.resume(suspended.run_id, {second: Approve()})
    assert result.output == "user:charge both / tool:charged 5 / tool:charged 7 / user:sum them"
    assert (await store.load(suspended.run_id)).queued_message is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (None, "has answered; continue the conversation with message=..."),
        ("  ", "the message is empty"),
    ],
)
async def test_a_run_that_answered_refuses_a_resume_without_a_real_message(
    message: str | None, expected: str
) -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel(["hi"]), store=store)
    done = await agent.run("hello")
    with pytest.raises(RunNotResumable, match=expected) as raised:
        await agent.resume(done.run_id, message=message)
    assert "\n" not in str(raised.value)
    assert (await store.load(done.run_id)).transitions == done.transitions


async def test_a_message_alone_does_not_decide_a_pending_call() -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel([call("charge", {"amount": 5})]), [charge], store=store)
    suspended = await agent.run("charge")
    with pytest.raises(RunNotResumable, match="a message may only accompany decisions"):
        await agent.resume(suspended.run_id, message="go ahead")
    stored = await store.load(suspended.run_id)
    assert (stored.status, stored.queued_message) == ("awaiting_approval", None)


async def test_a_failed_run_cannot_be_continued() -> None:
    agent = Agent(ScriptedModel([]), store=MemoryStore())
    failed = await agent.run("hello")
    assert failed.status == "failed"
    with pytest.raises(RunNotResumable, match=r"has ended \(failed\)"):
        await agent.resume(failed.run_id, message="still there?")


async def test_aborting_a_run_that_answered_is_refused() -> None:
    agent = Agent(ScriptedModel(["hi"]), store=MemoryStore())
    done = await agent.run("hello")
    with pytest.raises(RunNotResumable, match=r"has ended \(done\)"):
        await agent.abort(done.run_id, "bye")
