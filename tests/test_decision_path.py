"""One path for every decision: queued, given and approver decisions are checked by the same
code; a queued decision refused when applied is dropped and reported, never bricking the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_tools

from loopstate import (
    Agent,
    Approve,
    DecisionError,
    Edit,
    MemoryStore,
    RunState,
    ScriptedModel,
    StoreError,
)
from loopstate.engine.models.scripted import call
from loopstate.engine.operations import queue_decision
from loopstate.engine.state import QueuedDecision
from loopstate.engine.stores.sqlite import SQLiteStore


async def suspended(db: Path) -> tuple[Agent, str]:
    _, tools = make_tools()
    script = [call("write_file", {"path": "a", "content": "x"}), "written"]
    agent = Agent(ScriptedModel(script), tools, store=SQLiteStore(db), ids=lambda: "r1")
    result = await agent.run("go")
    assert result.status == "awaiting_approval"
    return agent, result.pending[0].call_id


async def test_a_queued_decision_refused_at_resume_is_dropped_and_the_run_waits(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, call_id = await suspended(tmp_path / "runs.db")
    state = await store.load("r1")
    poisoned = QueuedDecision(call_id=call_id, decision=Edit({"path": 3}), actor="x", at=1.0)
    await store.save(state.evolve(inbox=(poisoned,)), owner="me", now=1.0, ttl=1.0)

    waiting = await agent.resume("r1")
    assert (waiting.status, [p.call_id for p in waiting.pending]) == (
        "awaiting_approval",
        [call_id],
    )
    refused = [e for e in waiting.events if e.kind == "decision_refused"]
    assert [(e.call_id, e.actor) for e in refused] == [(call_id, "x")]
    assert (await store.load("r1")).inbox == ()  # dropped, not kept to fail every resume

    done = await agent.resume("r1", decisions={call_id: Approve()})
    assert (done.status, done.output) == ("done", "written")


async def test_queued_given_and_json_form_decisions_are_checked_alike(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, call_id = await suspended(tmp_path / "runs.db")
    for bad in ({"kind": "edit", "arguments": {"path": 3}}, {"kind": "maybe"}, 42):
        with pytest.raises(DecisionError):
            await agent.resume("r1", decisions={call_id: bad})
        with pytest.raises(DecisionError):
            await queue_decision(store, "r1", call_id, bad, actor="cli")
    assert (await store.load("r1")).inbox == ()
    done = await agent.resume("r1", decisions={call_id: {"kind": "approve"}})
    assert done.status == "done"


class FailingFinalSave(MemoryStore):
    """Refuses the first save of an answered run, as a store refuses data it cannot hold."""

    failed = False

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> RunState:
        if state.state == "done" and not self.failed:
            self.failed = True
            raise StoreError(f"run {state.run_id}: cannot store this")
        return await super().save(state, owner=owner, now=now, ttl=ttl)


async def test_a_failed_save_is_never_swallowed_the_result_and_the_store_agree() -> None:
    store = FailingFinalSave()
    result = await Agent(ScriptedModel(["the answer"]), store=store, ids=lambda: "r1").run("go")
    stored = await store.load("r1")
    assert (result.status, stored.status) == ("failed", "failed")
    assert result.error == stored.error == "StoreError: run r1: cannot store this"
    assert [t.target for t in stored.transitions] == ["thinking", "failed"]
