"""A writer whose lease ran out cannot save over what was written since it read the run
(fencing by the run's `revision`): a decision recorded meanwhile, in one step or on the
checked path, is never silently dropped by the stale writer's save; the run goes on from the
stored state, applying the decision, and its tool runs once."""

from __future__ import annotations

from pathlib import Path

import pytest
import worker_agent
from support import stores

from loopstate import Approve, Store
from loopstate.engine.clock import system_clock
from loopstate.engine.errors import RunBusy
from loopstate.engine.operations import queue_decision, record_decision
from loopstate.engine.store import ready

handles = stores.handles  # the fixtures: memory, SQLite and PostgreSQL stores
store = stores.store


@pytest.mark.parametrize("path", ["one step", "checked"])
async def test_a_stale_writers_save_is_refused_and_the_decision_recorded_meanwhile_stands(
    store: Store, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    result = await worker_agent.agent(store).run("go", run_id="r")
    call_id, digest = result.pending[0].call_id, result.pending[0].digest
    now = system_clock()
    # Writer A reads the run under a lease that ran out long ago (a GC pause, a slow step).
    stale = await store.acquire("r", owner="A", now=now - 100.0, ttl=1.0)
    decision = Approve(digest=digest)
    if path == "one step":  # allowed: no live lease holds the run
        assert await record_decision(store, "r", call_id, decision, actor="ann", clock=lambda: now)
    else:
        await queue_decision(store, "r", call_id, decision, actor="ann", clock=lambda: now)
    with pytest.raises(RunBusy, match="changed since"):
        await store.save(stale.evolve(updated_at=now + 1.0), owner="A", now=now + 1.0, ttl=30.0)
    stored = await store.load("r")
    assert [(q.call_id, q.actor) for q in stored.inbox] == [(call_id, "ann")]
    assert ready(stored)
    # Whoever reads the run again goes on from what is stored: the decision is applied.
    done = await worker_agent.agent(store).resume("r")
    assert done.status == "done"
    assert (tmp_path / "effects.txt").read_text().splitlines() == [f"r {call_id}"]


async def test_a_writer_saves_again_and_again_from_what_each_save_answers(store: Store) -> None:
    await worker_agent.agent(store).run("go", run_id="r")
    now = system_clock()
    first = state = await store.acquire("r", owner="A", now=now, ttl=30.0)
    for n in range(3):
        state = await store.save(state.evolve(updated_at=now + n), owner="A", now=now, ttl=30.0)
    assert state.revision == first.revision + 3 == (await store.load("r")).revision
    with pytest.raises(RunBusy, match="changed since"):  # its own older copy: refused too
        await store.save(first, owner="A", now=now, ttl=30.0)
    assert (await store.load("r")).revision == state.revision
