"""A decision recorded in one step (`Store.record_decision`, `engine/decision_guard`): one
round trip on PostgreSQL, counted on the wire (`pg_wire`); refused exactly as the one checker
refuses, on every store; used once when two deciders race."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import worker_agent
from pg_wire import Wire, counting_proxy
from support import stores
from support.waiting import until
from worker_support import wait_until_ended

from loopstate import (
    Abort,
    Agent,
    Approve,
    Deny,
    Edit,
    PostgresStore,
    ScriptedModel,
    Store,
)  # fmt: skip
from loopstate.engine.clock import system_clock
from loopstate.engine.errors import (
    AlreadyDecided,
    DecisionError,
    Forbidden,
    InvalidDecision,
    RunBusy,
    RunNotFound,
    StaleDigest,
    UnknownCall,
)
from loopstate.engine.models.scripted import call
from loopstate.engine.operations import queue_decision, record_decision
from loopstate.engine.rule import Rule
from loopstate.engine.store import ready
from loopstate.worker import Worker

NO_CHARGE = Rule(name="no-charge", tools=["charge"], forbid=True, reason="card frozen")


@pytest.fixture
def wire(postgres_dsn: str) -> Iterator[tuple[str, Wire]]:
    with counting_proxy(postgres_dsn) as proxied:
        yield proxied


handles = stores.handles  # the fixtures: memory, SQLite and PostgreSQL stores
store = stores.store


async def waiting(store: Store, run_id: str) -> tuple[str, str]:
    """A run of `worker_agent` waiting for its one charge: (call id, digest)."""
    result = await worker_agent.agent(store).run("go", run_id=run_id)
    return result.pending[0].call_id, result.pending[0].digest


async def test_a_decision_is_one_round_trip_on_postgres_and_leaves_the_run_ready(
    wire: tuple[str, Wire],
) -> None:
    dsn, counted = wire
    store = PostgresStore(dsn)
    runs = [(f"r{i}", *await waiting(store, f"r{i}")) for i in range(4)]
    kinds = [Approve, lambda digest: Deny("no", digest=digest), Approve, Abort]
    for n, ((run_id, call_id, digest), kind) in enumerate(zip(runs, kinds, strict=True)):
        before, before_log = counted.round_trips, await store.last_event_id()
        decision = kind(digest=digest) if kind is not Abort else Abort("stop")
        continues = await record_decision(store, run_id, call_id, decision, actor="ann", bound=True)
        trips = counted.round_trips - before - 1  # less the `last_event_id` above
        assert n == 0 or trips == 1, trips  # the first prepares the statement
        state = await store.load(run_id)
        assert continues
        assert ready(state)
        [queued] = state.inbox
        assert (queued.call_id, queued.actor, queued.decision.kind) == (
            call_id,
            "ann",
            decision.kind,
        )
        assert queued.decision.digest == digest  # bound to what the person saw (an abort too)
        [event] = await store.events(after=before_log)
        assert (event.run_id, event.queued, event.pending, event.status) == (
            run_id, 1, 1, "awaiting_approval",
        )  # fmt: skip
        assert event.seq == state.transitions[-1].seq
        assert event.updated_at == state.updated_at
    claimed = await store.claim(owner="w", now=system_clock(), ttl=30.0, limit=10)
    assert sorted(claimed) == [r for r, *_ in runs]  # a worker takes them on
    await store.close()


async def test_a_refused_decision_is_explained_by_the_checker_on_every_store(store: Store) -> None:
    call_id, digest = await waiting(store, "r")
    refused: list[type[DecisionError]] = []
    for wrong in (
        ("nope", Approve(digest=digest)),
        (call_id, Approve(digest="0" * len(digest))),
        (call_id, Approve()),  # a person's decision names the digest it was shown
    ):
        with pytest.raises(DecisionError) as error:
            await record_decision(store, "r", *wrong, actor="ann", bound=True)
        refused.append(type(error.value))
    assert refused == [UnknownCall, StaleDigest, InvalidDecision]
    assert (await store.load("r")).inbox == ()  # nothing recorded
    assert await record_decision(store, "r", call_id, Approve(digest=digest), actor="ann")
    with pytest.raises(AlreadyDecided, match="used once"):
        await record_decision(store, "r", call_id, Deny("no", digest=digest), actor="bob")
    assert [q.actor for q in (await store.load("r")).inbox] == ["ann"]
    with pytest.raises(RunNotFound):
        await record_decision(store, "ghost", call_id, Approve(digest=digest), actor="ann")


async def test_a_rule_saved_after_the_call_waited_refuses_its_approval_not_its_denial(
    store: Store,
) -> None:
    call_id, digest = await waiting(store, "r")
    now = system_clock()
    state = await store.acquire("r", owner="admin", now=now, ttl=30.0)
    await store.save(state.evolve(rules=(NO_CHARGE,)), owner="admin", now=now, ttl=30.0)
    await store.release("r", owner="admin")
    with pytest.raises(Forbidden, match="forbidden by rule no-charge: card frozen"):
        await record_decision(store, "r", call_id, Approve(digest=digest), actor="ann")
    assert await record_decision(store, "r", call_id, Deny("frozen", digest=digest), actor="ann")


async def test_an_edit_and_a_run_under_a_live_lease_take_the_checked_path(store: Store) -> None:
    call_id, digest = await waiting(store, "r")
    now = system_clock()
    await store.acquire("r", owner="driver", now=now, ttl=30.0)
    with pytest.raises(RunBusy):  # never written past the lease of the process driving it
        await record_decision(store, "r", call_id, Approve(digest=digest), actor="ann")
    await store.release("r", owner="driver")
    with pytest.raises(InvalidDecision, match="amount"):
        await record_decision(store, "r", call_id, Edit({"amount": "x"}, digest=digest), actor="a")
    edit = Edit({"amount": 3}, digest=digest)
    assert await record_decision(store, "r", call_id, edit, actor="ann", bound=True)
    assert (await store.load("r")).inbox[0].decision == edit


async def test_a_decision_and_an_expiry_or_another_decision_racing_exactly_one_wins(
    postgres_dsn: str,
) -> None:
    handles = [PostgresStore(postgres_dsn) for _ in range(3)]
    people, deadline, setup = handles
    for i in range(6):
        call_id, digest = await waiting(setup, f"r{i}")
        if i % 2:  # another person's decision, in one step too
            other = record_decision(
                deadline, f"r{i}", call_id, Deny("no", digest=digest), actor="b"
            )
        else:  # a deadline's expiry: the checked path, under the lease
            other = queue_decision(deadline, f"r{i}", call_id, Deny("late"), actor="deadline")
        mine = record_decision(people, f"r{i}", call_id, Approve(digest=digest), actor="a")
        outcomes = await asyncio.gather(mine, other, return_exceptions=True)
        lost = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(lost) == 1, outcomes
        assert isinstance(lost[0], AlreadyDecided | RunBusy), outcomes
        inbox = (await setup.load(f"r{i}")).inbox
        assert [q.call_id for q in inbox] == [call_id]  # used once
    for handle in handles:
        await handle.close()


async def test_a_sub_agents_last_decision_makes_the_top_run_of_its_tree_ready(
    store: Store,
) -> None:
    writer = Agent(ScriptedModel([call("charge", {"amount": 1}), "Done."]), [worker_agent.charge],
                   store=store)  # fmt: skip
    boss = Agent(ScriptedModel([call("writer", {"task": "charge"}), "ok"]),
                 [writer.as_tool(name="writer", description="Charges.")], store=store)  # fmt: skip
    top = await boss.run("go", run_id="top")
    [request] = top.pending  # the writer's call, waiting in the writer's run
    assert request.run_id is not None
    assert request.run_id != "top"
    continues = await record_decision(
        store, request.run_id, request.call_id, Approve(digest=request.digest), actor="ann"
    )
    assert continues
    assert ready(await store.load("top"))  # a worker continues the tree from its top


async def test_a_waiting_worker_is_woken_by_a_decision_in_one_step_not_by_its_poll(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    store = PostgresStore(postgres_dsn)
    call_id, digest = await waiting(store, "r")
    agent = worker_agent.agent(store)
    stop, worker = asyncio.Event(), Worker(agent, poll_s=3600.0)  # would sleep for an hour
    serving = asyncio.create_task(worker.serve(stop))
    await until(lambda: worker.claims >= 1)  # it looked once (listening), found nothing: waits
    assert await record_decision(store, "r", call_id, Approve(digest=digest), actor="ann")
    await wait_until_ended(store, 1)
    stop.set()
    await serving
    assert (await store.load("r")).status == "done"
    await store.close()
