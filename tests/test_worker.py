"""`Worker` and `loopstate worker`: ready runs are claimed, resumed once, and drained on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import worker_agent
from support import forking
from support.waiting import until
from worker_support import effects_of, loopstate_process, wait_until_ended

from loopstate import Approve, PostgresStore, RunNotResumable, RunState, Store
from loopstate.engine.operations import queue_decision
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.worker import Worker


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        sqlite = SQLiteStore(tmp_path / "runs.db")
        yield sqlite
        sqlite.close()
    else:
        postgres = PostgresStore(request.getfixturevalue("postgres_dsn"))
        yield postgres
        await postgres.close()


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.txt"
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(path))
    return path


async def serve_until(worker: Worker, store: Store, ended: int) -> None:
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        await wait_until_ended(store, ended)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 20.0)


async def test_a_worker_resumes_decided_runs_once_and_leaves_undecided_ones(
    store: Store, effects: Path
) -> None:
    agent = worker_agent.agent(store)
    suspended = [await agent.run("go", run_id=f"r{i}") for i in range(3)]
    for result in suspended[:2]:
        await queue_decision(store, result.run_id, result.pending[0].call_id, Approve(), actor="t")
    worker = Worker(agent, poll_s=0.05)
    await serve_until(worker, store, ended=2)
    assert [(await store.load(f"r{i}")).status for i in range(3)] == [
        "done", "done", "awaiting_approval",
    ]  # fmt: skip
    assert sorted(line.split()[0] for line in effects_of(effects)) == ["r0", "r1"]
    assert worker.resumed == 2
    assert (await store.acquire("r0", owner="other", now=agent.clock(), ttl=5.0)).status == "done"


async def test_a_worker_takes_over_a_dead_holders_run_without_running_its_tool_again(
    store: Store, effects: Path
) -> None:
    agent = worker_agent.agent(store)
    await agent.run("go", run_id="r")
    state = await store.load("r")  # as its holder saved it before running the approved tool:
    started = {"status": "running", "decision": Approve(), "decided_by": "t"}
    crashed = state.replace_call(state.batch[0].model_copy(update=started))
    crashed = crashed.evolve(state="executing_tool")
    past = agent.clock() - 100.0  # the holder's lease ended long ago; it never came back
    await store.save(crashed, owner="gone-host:1:x", now=past, ttl=1.0)
    await serve_until(Worker(agent, poll_s=0.05), store, ended=1)
    ended = await store.load("r")
    assert ended.status == "done"
    assert ended.calls[0].status == "interrupted"
    assert effects_of(effects) == []


async def test_loopstate_worker_on_sqlite_runs_a_cli_decision_and_drains_on_sigterm(
    tmp_path: Path, effects: Path
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    result = await worker_agent.agent(store).run("go", run_id="r")
    worker = loopstate_process(
        "worker", "--agent", "worker_agent:agent", "--db", str(db), "--poll", "0.05",
        effects=effects, log=tmp_path / "worker.log", LOOPSTATE_TEST_HOLD="1.5",
    )  # fmt: skip
    try:
        approve = loopstate_process(
            "approve", "r", result.pending[0].call_id, "--db", str(db),
            effects=effects, log=tmp_path / "approve.log",
        )  # fmt: skip
        assert approve.wait(30) == 0
        await until(lambda: effects_of(effects))  # the worker is inside the tool
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    log = (tmp_path / "worker.log").read_text()
    assert "stopped after resuming 1 runs" in log
    drained = await store.load("r")  # the step in hand finished; the run is left to others
    assert (drained.status, [c.status for c in drained.calls]) == ("running", ["succeeded"])
    assert len(effects_of(effects)) == 1
    store.close()


def test_loopstate_worker_explains_a_missing_agent(tmp_path: Path) -> None:
    out = forking.run(
        [sys.executable, "-m", "loopstate", "worker", "--agent", "nowhere:agent", "--db",
         str(tmp_path / "runs.db")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert "cannot load the agent nowhere:agent" in out.stderr


async def test_a_draining_worker_finishes_the_current_step_and_leaves_the_run_to_another(
    store: Store, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_HOLD", "0.5")
    agent = worker_agent.agent(store)
    suspended = await agent.run("go", run_id="r")
    await queue_decision(store, "r", suspended.pending[0].call_id, Approve(), actor="t")
    stop = asyncio.Event()
    first = Worker(agent, poll_s=0.05)
    serving = asyncio.create_task(first.serve(stop))
    await until(effects.exists)  # the charge has started: the worker is mid-step
    stop.set()
    await asyncio.wait_for(serving, 20.0)
    drained = await store.load("r")
    assert drained.status == "running"  # the step finished and was saved, the run goes on
    assert [c.status for c in drained.calls] == ["succeeded"]
    await serve_until(Worker(agent, poll_s=0.05), store, ended=1)
    assert (await store.load("r")).status == "done"
    assert len(effects_of(effects)) == 1


async def test_a_message_queued_for_a_run_that_answered_makes_it_ready_for_a_worker(
    store: Store,
) -> None:
    from loopstate import Agent, ScriptedModel
    from loopstate.engine.operations import queue_message
    from loopstate.engine.store import ready

    agent = Agent(ScriptedModel(["Hello.", "Paris."], by_step=True), store=store)
    answered = await agent.run("hi", run_id="chat")
    assert not ready(await store.load("chat"))
    with pytest.raises(RunNotResumable, match="empty"):
        await queue_message(store, "chat", "  ")
    await queue_message(store, "chat", "And the capital of France?")
    with pytest.raises(RunNotResumable, match="already has a message"):
        await queue_message(store, "chat", "again")
    assert ready(await store.load("chat"))
    stop = asyncio.Event()
    serving = asyncio.create_task(Worker(agent, poll_s=0.05).serve(stop))

    async def went_on_in_chat() -> RunState | None:  # the worker took the message, answered
        state = await store.load("chat")
        return state if state.output == "Paris." else None

    went_on = await until(went_on_in_chat)
    stop.set()
    await asyncio.wait_for(serving, 20.0)
    assert (went_on.status, went_on.output, went_on.queued_message) == ("done", "Paris.", None)
    assert [m.content for m in went_on.messages if m.role == "user"] == [
        "hi",
        "And the capital of France?",
    ]
    assert went_on.run_id == answered.run_id
    assert ("done", "thinking", "user_message") in [
        (t.source, t.target, t.event) for t in went_on.transitions
    ]
