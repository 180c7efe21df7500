"""Approval deadlines (`@tool(decide_within=..., on_expiry=...)`): stored with the pending call,
applied once by whoever drives runs (the worker, `serve`) with actor `deadline`; a decision and
an expiry racing → exactly one outcome. Time is the agent's clock: the test moves it on by
writing a file every process reads (`deadline_agent.py`), so nothing waits for time to pass."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import deadline_agent
import pytest
from support import forking
from support.cli import loopstate
from support.waiting import until
from worker_support import TESTS, loopstate_process

from loopstate import (
    Abort,
    Agent,
    AgentLoop,
    Approve,
    DefinitionError,
    Escalate,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    tool,
)
from loopstate.engine.deadlines import expire_due
from loopstate.engine.diagram import graph_of, overlay_of, to_mermaid
from loopstate.engine.errors import AlreadyDecided
from loopstate.engine.models.scripted import call
from loopstate.engine.operations import queue_decision


@pytest.fixture
def clock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agents' clock, at 1000 s."""
    path = tmp_path / "clock"
    deadline_agent.set_clock(path, 1000)
    monkeypatch.setenv("LOOPSTATE_TEST_CLOCK", str(path))
    return path


async def test_an_expired_call_is_denied_once_with_actor_deadline_and_the_model_sees_it(
    clock_file: Path,
) -> None:
    agent = deadline_agent.agent()
    waiting = await agent.run("send the report")
    (pending,) = waiting.pending
    assert pending.deadline == 1002.0  # stored with the call, on the run's clock
    assert await expire_due(agent.store, clock=deadline_agent.clock) == 0  # not yet due
    deadline_agent.set_clock(clock_file, 1002)
    assert await expire_due(agent.store, clock=deadline_agent.clock) == 1
    assert await expire_due(agent.store, clock=deadline_agent.clock) == 0  # applied once
    (queued,) = (await agent.store.load(waiting.run_id)).inbox
    assert (queued.actor, queued.decision.kind) == ("deadline", "deny")
    done = await agent.resume(waiting.run_id)
    assert (
        done.output
        == "told: Denied: the reviewer did not allow this call. Reason: no answer in time"
    )
    expired = next(t for t in done.transitions if t.event == "expired")
    assert (expired.source, expired.target, expired.actor) == (
        "awaiting_approval", "executing_tool", "deadline",
    )  # fmt: skip
    drawn = to_mermaid(graph_of(AgentLoop), overlay_of(done.transitions, done.status))
    assert "awaiting_approval --> executing_tool : expired ×1" in drawn  # the run's overlay


async def test_a_decision_before_the_expiry_wins_and_the_expiry_is_refused(
    clock_file: Path,
) -> None:
    agent = deadline_agent.agent()
    waiting = await agent.run("send the report")
    await queue_decision(agent.store, waiting.run_id, "c1", Approve(), actor="person")
    deadline_agent.set_clock(clock_file, 1005)
    assert await expire_due(agent.store, clock=deadline_agent.clock) == 0
    done = await agent.resume(waiting.run_id)
    assert done.output == "told: sent to bob"


async def test_abort_and_escalate_on_expiry(clock_file: Path) -> None:
    @tool(needs_approval=True, decide_within=2.0, on_expiry=Abort("nobody answered"))
    def wire(amount: int) -> str:
        """Wire money."""
        return "wired"

    store = MemoryStore()
    aborting = Agent(ScriptedModel([call("wire", {"amount": 5})]), [wire], store=store,
                     clock=deadline_agent.clock)  # fmt: skip
    first = await aborting.run("pay")
    escalated = dataclasses.replace(wire, on_expiry=Escalate(to="finance-leads"))
    escalating = Agent(ScriptedModel([call("wire", {"amount": 7})]), [escalated], store=store,
                       clock=deadline_agent.clock)  # fmt: skip
    second = await escalating.run("pay")
    deadline_agent.set_clock(clock_file, 1010)
    assert await expire_due(store, clock=deadline_agent.clock) == 2
    aborted = await aborting.resume(first.run_id)
    assert (aborted.status, aborted.stop_reason) == ("aborted", "aborted: nobody answered")
    assert aborted.transitions[-1].actor == "deadline"
    (still,) = await escalating.pending(second.run_id)
    assert (still.metadata["escalated_to"], still.deadline) == ("finance-leads", None)


def test_a_deadline_that_cannot_work_is_refused_when_declared() -> None:
    with pytest.raises(DefinitionError, match="decide_within must be positive"):
        tool(needs_approval=True, decide_within=timedelta(0), name="x")(lambda: "x")
    with pytest.raises(DefinitionError, match="on_expiry must be Deny"):
        Agent(ScriptedModel([]), decide_within=5, on_expiry=Approve(), store=MemoryStore())  # type: ignore[arg-type]


def race_child(db: Path, act: str, run_id: str) -> subprocess.Popen[str]:
    child = forking.Popen(
        [sys.executable, str(TESTS / "deadline_agent.py"), str(db), act, run_id, "c1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    return child


async def test_an_expiry_and_a_decision_racing_from_two_processes_give_one_outcome(
    tmp_path: Path, clock_file: Path
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    waiting = await deadline_agent.agent(store).run("send the report")
    deadline_agent.set_clock(clock_file, 1003)
    expirer = race_child(db, "expire", waiting.run_id)
    approver = race_child(db, "approve", waiting.run_id)
    with expirer, approver:
        for child in (expirer, approver):  # released together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outcomes = [c.communicate(timeout=300)[0].strip() for c in (expirer, approver)]
    assert outcomes.count("applied") == 1, outcomes
    assert set(outcomes) - {"applied"} <= {"none due", "AlreadyDecided", "RunBusy"}
    (queued,) = (await store.load(waiting.run_id)).inbox  # exactly one decision recorded
    assert queued.actor == ("deadline" if outcomes[0] == "applied" else "person")
    with pytest.raises(AlreadyDecided):
        await queue_decision(store, waiting.run_id, "c1", Approve(), actor="late")
    store.close()


async def test_a_worker_process_applies_a_deadline_across_a_restart(
    tmp_path: Path, clock_file: Path
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    waiting = await deadline_agent.agent(store).run("send the report")
    pending = loopstate("runs", "pending", "--db", str(db), cwd=tmp_path)
    assert "c1  send" in pending.stdout
    assert "due 1970-01-01 00:16:42 UTC" in pending.stdout
    env = {"LOOPSTATE_TEST_CLOCK": str(clock_file)}
    args = ("worker", "--agent", "deadline_agent:agent", "--db", str(db), "--poll", "0.05")
    log = tmp_path / "worker.log"

    def serving(count: int) -> bool:
        """the worker has logged that it serves the store"""
        return log.exists() and log.read_text().count("serving") >= count

    first = loopstate_process(*args, effects=tmp_path / "fx", log=log, **env)
    await until(lambda: serving(1))
    first.kill()  # SIGKILL, before the deadline: it lives only in the store
    first.wait()
    second = loopstate_process(*args, effects=tmp_path / "fx", log=log, **env)
    try:
        await until(lambda: serving(2))
        deadline_agent.set_clock(clock_file, 1002.5)

        async def finished() -> bool:
            """the worker expired the call and resumed the run to its end"""
            return (await store.load(waiting.run_id)).status == "done"

        await until(finished)
    finally:
        second.terminate()
        second.wait()
    state = await store.load(waiting.run_id)
    assert (
        state.output
        == "told: Denied: the reviewer did not allow this call. Reason: no answer in time"
    )
    assert [t.actor for t in state.transitions if t.event == "expired"] == ["deadline"]
    store.close()
