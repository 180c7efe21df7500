"""PostgresStore by round trips, counted on the wire by a proxy that reads the protocol
(`pg_wire`): each write of the store port, a claim and a load are one round trip each; a
worker's steps cost a few; a decision queued from outside on the checked path, four (in one
step, `record_decision`, one: see test_decision_one_step)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import worker_agent
from pg_wire import Wire, counting_proxy
from support.waiting import until
from worker_support import wait_until_ended

from loopstate import Approve, PostgresStore
from loopstate.engine.clock import system_clock
from loopstate.engine.deadlines import DeadlineWatch
from loopstate.engine.operations import queue_decision
from loopstate.worker import Worker


@pytest.fixture
def wire(postgres_dsn: str) -> Iterator[tuple[str, Wire]]:
    with counting_proxy(postgres_dsn) as proxied:
        yield proxied


async def trips(wire: Wire, act: object) -> int:
    before = wire.round_trips
    await act  # type: ignore[misc]
    return wire.round_trips - before


async def test_a_save_a_claim_a_lease_and_a_load_are_one_round_trip_each(
    wire: tuple[str, Wire],
) -> None:
    dsn, counted = wire
    store = PostgresStore(dsn)
    agent = worker_agent.agent(store)
    for i in range(2):  # the first use of each statement prepares it: once per connection
        await agent.run("go", run_id=f"r{i}")
        await queue_decision(store, f"r{i}", (await store.load(f"r{i}")).pending[0].call_id,
                             Approve(), actor="t")  # fmt: skip
    await store.claim(owner="w", now=system_clock(), ttl=30.0, limit=1)  # takes r0
    state = await store.acquire("r0", owner="w", now=system_clock(), ttl=30.0)
    for n in range(5):
        # each save starts from the revision the one before left (see `test_stale_writer`)
        later = state.evolve(updated_at=state.updated_at + n + 1, revision=state.revision + n)
        assert await trips(counted, store.save(later, owner="w", now=system_clock(), ttl=30.0)) == 1
    assert await trips(counted, store.claim(owner="w", now=system_clock(), ttl=30, limit=1)) == 1
    assert await trips(counted, store.renew("r0", owner="w", now=system_clock(), ttl=30.0)) == 1
    assert await trips(counted, store.load("r0")) == 1
    assert await trips(counted, store.acquire("r0", owner="w", now=system_clock(), ttl=30)) == 1
    assert await trips(counted, store.release("r0", owner="w")) == 1
    assert (await store.load("r0")).updated_at == state.updated_at + 5  # the saves were saved
    await store.close()


async def test_a_worker_resumes_a_run_in_one_round_trip_per_save_and_three_more(
    wire: tuple[str, Wire], postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    dsn, counted = wire
    store, runs = PostgresStore(dsn), 10
    agent = worker_agent.agent(store)
    suspended = [await agent.run("go", run_id=f"r{i}") for i in range(runs)]
    for n, result in enumerate(suspended):  # the first prepares its statements
        before = counted.round_trips
        await queue_decision(store, result.run_id, result.pending[0].call_id, Approve(), actor="t")
        assert n == 0 or counted.round_trips - before == 4  # read, lease + read, save, release
    observer = PostgresStore(postgres_dsn)  # not through the proxy: its polls are not counted
    # deadlines off: their scans are counted on their own below
    stop, worker = asyncio.Event(), Worker(agent, poll_s=0.05, deadlines_every_s=None)
    before = counted.round_trips
    serving = asyncio.create_task(worker.serve(stop))
    await wait_until_ended(observer, runs)
    stop.set()
    await serving
    resumed = counted.round_trips - before
    states = [await observer.load(r.run_id) for r in suspended]
    assert all(s.status == "done" for s in states)
    saves = sum(
        len(s.transitions) - len(r.transitions) for s, r in zip(states, suspended, strict=True)
    )
    claims = worker.claims
    assert resumed <= saves + claims + 3 * runs  # each run: lease + read, read, release
    await store.close()
    await observer.close()


async def test_a_deadline_scan_of_unchanged_waiting_runs_is_one_round_trip(
    wire: tuple[str, Wire], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    dsn, counted = wire
    store = PostgresStore(dsn)
    agent = worker_agent.agent(store)
    for i in range(5):
        await agent.run("go", run_id=f"r{i}")
    watch = DeadlineWatch(store, clock=system_clock, every_s=0.0)
    await watch.scan()  # the first scan reads each waiting run once
    assert await trips(counted, watch.scan()) == 1  # then: one listing, no run read again
    await store.close()


async def test_a_waiting_worker_is_woken_by_a_decision_not_by_its_poll(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    store = PostgresStore(postgres_dsn)
    agent = worker_agent.agent(store)
    suspended = await agent.run("go", run_id="r")
    stop, worker = asyncio.Event(), Worker(agent, poll_s=3600.0)  # would sleep for an hour
    serving = asyncio.create_task(worker.serve(stop))
    await until(lambda: worker.claims >= 1)  # it looked once (listening), found nothing: waits
    await queue_decision(store, "r", suspended.pending[0].call_id, Approve(), actor="t")
    await wait_until_ended(store, 1)
    stop.set()
    await serving
    assert worker.claims >= 2
    await store.close()
