"""The store contract, continued (same three stores, see `test_store_contract`): leases
taken, renewed and released; ready runs claimed by one owner at a time; pause requests."""

from __future__ import annotations

import asyncio

import pytest
import support.stores as stores
from support.stores import suspended_agent

from loopstate import Approve, RunBusy, RunNotFound
from loopstate.engine.operations import queue_decision
from loopstate.engine.state import CallRecord, QueuedDecision, RunState
from loopstate.engine.store import PauseRequest

handles = stores.handles  # the fixtures: memory, SQLite and PostgreSQL stores
store = stores.store


async def test_a_live_lease_of_another_owner_makes_the_run_busy(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    await store.acquire("run-1", owner="a", now=100.0, ttl=30.0)
    with pytest.raises(RunBusy, match="run run-1 is busy"):
        await store.acquire("run-1", owner="b", now=110.0, ttl=30.0)
    state = await store.load("run-1")
    with pytest.raises(RunBusy):
        await store.save(state, owner="b", now=110.0, ttl=30)
    with pytest.raises(RunBusy):
        await store.renew("run-1", owner="b", now=110.0, ttl=30)
    # expired: another owner may take it; released: likewise
    assert (await store.acquire("run-1", owner="b", now=131.0, ttl=30.0)).run_id == "run-1"
    await store.release("run-1", owner="b")
    assert (await store.acquire("run-1", owner="c", now=132.0, ttl=30.0)).run_id == "run-1"


async def test_acquiring_an_unknown_run_raises_run_not_found(store) -> None:
    with pytest.raises(RunNotFound, match="no run 'ghost'"):
        await store.acquire("ghost", owner="a", now=1.0, ttl=30.0)


async def test_a_released_lease_lets_another_owner_save(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    state = await store.acquire("run-1", owner="a", now=100.0, ttl=30.0)
    await store.release("run-1", owner="b")  # not b's: nothing happens
    with pytest.raises(RunBusy):
        await store.acquire("run-1", owner="b", now=101.0, ttl=30.0)
    await store.release("run-1", owner="a")
    ended = state.evolve(state="aborted", stop_reason="test", updated_at=102.0)
    await store.save(ended, owner="b", now=102.0, ttl=30.0)
    assert (await store.load("run-1")).status == "aborted"


async def test_renewing_keeps_the_lease_past_its_first_expiry(store) -> None:
    agent, _ = suspended_agent(store)
    await agent.run("go")
    await store.acquire("run-1", owner="a", now=100.0, ttl=30.0)
    await store.renew("run-1", owner="a", now=125.0, ttl=30.0)
    with pytest.raises(RunBusy):
        await store.acquire("run-1", owner="b", now=140.0, ttl=30.0)  # past 130: still a's
    assert (await store.acquire("run-1", owner="b", now=156.0, ttl=30.0)).run_id == "run-1"
    with pytest.raises(RunNotFound):
        await store.renew("ghost", owner="a", now=1.0, ttl=30.0)


def waiting(run_id: str, *, updated_at: float, decided: bool = False, **fields: object) -> RunState:
    """A run suspended on one gated call, with its decision queued if `decided`."""
    record = CallRecord(call_id="c1", tool="write_file", raw_arguments="{}", status="awaiting")
    inbox = (QueuedDecision(call_id="c1", decision=Approve(), actor="t", at=1.0),)
    return RunState(
        run_id=run_id, state="awaiting_approval", calls=(record,), updated_at=updated_at,
        inbox=inbox if decided else (), **fields,
    )  # fmt: skip


async def test_claim_leases_each_ready_run_to_one_owner_until_its_lease_ends(store) -> None:
    runs = [
        RunState(run_id="ended", state="done", updated_at=1.0),
        waiting("undecided", updated_at=2.0),
        waiting("decided", updated_at=4.0, decided=True),
        RunState(run_id="crashed", state="executing_tool", updated_at=3.0),
        RunState(run_id="asks-user", state="awaiting_input", phase="p", updated_at=1.5),
    ]
    for run in runs:
        await store.create(run, owner="creator", now=100.0, ttl=10.0)
    assert await store.claim(owner="a", now=105.0, ttl=10.0, limit=10) == []  # creator's
    assert await store.claim(owner="a", now=111.0, ttl=10.0, limit=10) == ["crashed", "decided"]
    assert await store.claim(owner="b", now=112.0, ttl=10.0, limit=10) == []
    with pytest.raises(RunBusy):
        await store.acquire("crashed", owner="b", now=112.0, ttl=10.0)
    await store.release("decided", owner="a")
    assert await store.claim(owner="b", now=113.0, ttl=10.0, limit=1) == ["decided"]
    assert await store.claim(owner="b", now=122.0, ttl=10.0, limit=10) == ["crashed"]


async def test_a_queued_decision_makes_a_suspended_run_ready_and_its_end_unready(store) -> None:
    agent, _ = suspended_agent(store)
    suspended = await agent.run("go")
    later = agent.clock() + 1.0
    assert await store.claim(owner="w", now=later, ttl=30.0, limit=5) == []
    await queue_decision(store, "run-1", suspended.pending[0].call_id, Approve(), actor="t")
    assert await store.claim(owner="w", now=later, ttl=30.0, limit=5) == ["run-1"]
    assert (await agent.resume("run-1", owner="w")).status == "done"
    assert await store.claim(owner="v", now=later + 60.0, ttl=30.0, limit=5) == []


async def test_concurrent_claimers_never_get_the_same_run(handles) -> None:
    first, second = handles(), handles()
    for i in range(12):
        await first.create(waiting(f"r{i}", updated_at=float(i), decided=True),
                           owner="c", now=0.0, ttl=1.0)  # fmt: skip
    batches = await asyncio.gather(
        *(
            claimer.claim(owner=name, now=10.0, ttl=30.0, limit=3)
            for _ in range(3)
            for name, claimer in (("a", first), ("b", second))
        )
    )
    claimed = [run_id for batch in batches for run_id in batch]
    assert sorted(claimed) == sorted(f"r{i}" for i in range(12))


async def test_a_pause_request_stands_once_until_it_is_taken(store) -> None:
    assert await store.pause_asked("run-p") is None
    await store.ask_pause("run-p", by="alice", now=10.0)
    await store.ask_pause("run-p", by="bob", now=11.0)  # asking twice asks once
    assert await store.pause_asked("run-p") == PauseRequest(by="alice", at=10.0)
    await store.drop_pause("run-p")
    assert await store.pause_asked("run-p") is None
