"""The store contract, continued (same three stores, see `test_store_contract`): the
store-wide event log, pages of runs by cursor, idempotency keys' answers, migrating to them."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import support.stores as stores
from support.cli import loopstate
from support.stores import corrupt, suspended_agent

from loopstate import Approve, MemoryStore, Store
from loopstate.engine.operations import queue_decision
from loopstate.engine.state import RunState
from loopstate.engine.store import Pruned
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.engine.stores.sqlite_schema import DB_VERSION

handles = stores.handles  # the fixtures: memory, SQLite and PostgreSQL stores
store = stores.store


async def test_every_write_of_a_run_is_logged_in_order_with_a_growing_id(store) -> None:
    agent, _ = suspended_agent(store)
    suspended = await agent.run("go")
    logged = await store.events(after=0)
    assert [e.id for e in logged] == sorted({e.id for e in logged})
    assert {e.run_id for e in logged} == {"run-1"}
    last = logged[-1]
    assert (last.state, last.status, last.pending, last.queued) == (
        "awaiting_approval", "awaiting_approval", 1, 0,
    )  # fmt: skip
    assert last.seq == suspended.transitions[-1].seq
    assert await store.last_event_id() == last.id
    assert await store.events(after=last.id) == []
    await queue_decision(store, "run-1", suspended.pending[0].call_id, Approve(), actor="t")
    [queued] = await store.events(after=last.id)
    assert (queued.id > last.id, queued.queued, queued.seq) == (True, 1, last.seq)
    assert queued.updated_at > last.updated_at  # a queued decision is a change of the run
    assert [e.id for e in await store.events(after=logged[1].id, limit=2)] == [
        e.id for e in logged[2:4]
    ]


async def test_a_reader_polling_the_log_misses_no_write_of_concurrent_writers(
    handles: Callable[[], Store],
) -> None:
    """Writers on several handles (processes) save at once; a reader that only ever asks for
    what follows the last id it saw ends with every entry, once, in id order."""
    writers = [handles() for _ in range(8)]
    reader = handles()
    seen: list[int] = []
    done = asyncio.Event()

    async def write(w: int, writer: Store) -> None:
        for i in range(20):
            run = RunState(run_id=f"w{w}-{i}", state="thinking", updated_at=float(i))
            await writer.create(run, owner=f"w{w}", now=0.0, ttl=60.0)
            await writer.save(run.evolve(steps=1), owner=f"w{w}", now=0.0, ttl=60.0)

    async def read() -> None:
        while True:
            finished = done.is_set()
            seen.extend(e.id for e in await reader.events(after=seen[-1] if seen else 0))
            if finished:
                return
            await asyncio.sleep(0)

    reading = asyncio.create_task(read())
    await asyncio.gather(*(write(w, s) for w, s in enumerate(writers)))
    done.set()
    await reading
    everything = [e.id for e in await reader.events(after=0, limit=10_000)]
    assert len(everything) == 8 * 20 * 2
    assert seen == everything


async def test_pages_by_cursor_have_no_gap_and_no_repeat_while_runs_come_and_change(
    store,
) -> None:
    for i in range(10):
        run = RunState(run_id=f"r{i:02}", created_at=float(i // 2), updated_at=float(i // 2))
        await store.create(run, owner="c", now=0.0, ttl=1.0)
    first = await store.list_runs(by="created", limit=4)
    pages = [first]
    for n in range(3):
        late = RunState(run_id=f"late{n}", created_at=100.0 + n, updated_at=100.0 + n)
        await store.create(late, owner="c", now=0.0, ttl=1.0)
        touched = (await store.load("r00")).evolve(updated_at=200.0 + n)
        await store.save(touched, owner="c", now=0.0, ttl=1.0)
        last = pages[-1][-1]
        pages.append(
            await store.list_runs(by="created", limit=4, cursor=(last.created_at, last.run_id))
        )
    listed = [r.run_id for page in pages for r in page]
    assert listed == [f"r{i:02}" for i in reversed(range(10))]
    assert pages[-1] == []
    by_update = await store.list_runs(limit=2)
    assert [r.run_id for r in by_update] == ["r00", "late2"]
    cursor = (by_update[-1].updated_at, by_update[-1].run_id)
    assert [r.run_id for r in await store.list_runs(limit=3, cursor=cursor)] == [
        "late1", "late0", "r09",
    ]  # fmt: skip
    assert await store.list_runs(status="done", by="created") == []


async def test_an_idempotency_key_keeps_its_first_answer_for_every_handle(
    handles: Callable[[], Store],
) -> None:
    first, second = handles(), handles()
    assert await first.reserve_key("k", "f1", now=10.0, stale_s=30.0) is None
    pending = await second.reserve_key("k", "f1", now=11.0, stale_s=30.0)
    assert pending is not None
    assert (pending.fingerprint, pending.status) == ("f1", None)
    await first.keep_answer("k", 200, {"ok": True, "n": [1]})
    kept = await second.reserve_key("k", "f2", now=1e6, stale_s=30.0)  # answered: kept
    assert kept is not None
    assert (kept.fingerprint, kept.status, kept.body) == (
        "f1", 200, {"ok": True, "n": [1]},
    )  # fmt: skip
    assert await second.reserve_key("dead", "f", now=10.0, stale_s=30.0) is None
    assert await first.reserve_key("dead", "f", now=41.0, stale_s=30.0) is None  # taken over
    await first.drop_key("dead")
    assert await second.reserve_key("dead", "g", now=42.0, stale_s=30.0) is None


async def test_a_sqlite_file_of_schema_2_is_migrated_and_its_runs_keep_working(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    first = SQLiteStore(path)
    suspended = await suspended_agent(first)[0].run("go")
    first.close()
    for statement in (
        "DROP TABLE events", "DROP TABLE answers", "DROP INDEX runs_by_updated",
        "DROP INDEX runs_by_created", "DROP TABLE pruned", "ALTER TABLE runs DROP COLUMN revision",
        "PRAGMA user_version = 2",
    ):  # fmt: skip
        corrupt(path, statement)
    old = SQLiteStore(path)
    assert await old.last_event_id() == 0  # nothing was logged before the log existed
    await queue_decision(old, "run-1", suspended.pending[0].call_id, Approve(), actor="t")
    [event] = await old.events(after=0)
    assert (event.id, event.run_id, event.queued) == (1, "run-1", 1)
    assert [r.run_id for r in await old.list_runs(by="created")] == ["run-1"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (DB_VERSION,)
    old.close()


@pytest.mark.parametrize("table", ["events"])
async def test_a_corrupt_event_row_is_a_store_error_naming_it(tmp_path: Path, table: str) -> None:
    path = tmp_path / "runs.db"
    await suspended_agent(SQLiteStore(path))[0].run("go")
    corrupt(path, f"UPDATE {table} SET body = json_remove(body, '$.status') WHERE id = 2")
    with pytest.raises(Exception, match=r"corrupt events row 2 in .*runs.db: Field required"):
        await SQLiteStore(path).events(after=0)


async def test_a_memory_store_keeps_the_newest_entries_of_its_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("loopstate.engine.stores.memory.MEMORY_LOG", 3)
    memory = MemoryStore()
    for i in range(8):
        await memory.create(RunState(run_id=f"r{i}"), owner="o", now=0.0, ttl=1.0)
    assert await memory.last_event_id() == 8
    kept = await memory.events(after=0)
    assert [(e.id, e.run_id) for e in kept] == [(5, "r4"), (6, "r5"), (7, "r6"), (8, "r7")]
    assert [e.id for e in await memory.events(after=6, limit=1)] == [7]


async def test_pruning_drops_old_entries_and_answers_but_none_a_reader_still_needs(
    store,
) -> None:
    for i in range(6):  # written at times 100 to 105
        at = 100.0 + i
        await store.create(RunState(run_id=f"r{i}", created_at=at, updated_at=at),
                           owner="o", now=0.0, ttl=1.0)  # fmt: skip
    ids = [e.id for e in await store.events(after=0)]
    await store.reserve_key("old", "f", now=50.0, stale_s=5.0)
    await store.keep_answer("old", 200, {"ok": True})
    await store.reserve_key("new", "f", now=200.0, stale_s=5.0)
    # r0 to r2 are older than 103, but a reader was sent only up to r1's entry
    assert await store.prune(before=103.0, keep_after=ids[1]) == Pruned(events=2, answers=1)
    assert [e.id for e in await store.events(after=0)] == ids[2:]
    assert await store.pruned_upto() == ids[1]
    assert await store.prune(before=103.0) == Pruned(events=1, answers=0)
    assert [e.id for e in await store.events(after=0)] == ids[3:]
    assert await store.prune(before=1e9) == Pruned(events=3, answers=1)
    assert await store.events(after=0) == []
    assert await store.pruned_upto() == await store.last_event_id() == ids[-1]
    await store.create(RunState(run_id="r6"), owner="o", now=0.0, ttl=1.0)
    [after] = await store.events(after=0)
    assert after.id > ids[-1]  # ids are never reused
    assert await store.reserve_key("old", "g", now=300.0, stale_s=5.0) is None  # forgotten


def test_loopstate_store_prune_removes_what_is_older_than_the_age_given(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"

    async def seed() -> None:
        sqlite = SQLiteStore(path)
        await sqlite.create(RunState(run_id="old", updated_at=1.0), owner="o", now=0.0, ttl=1.0)
        now = time.time()
        await sqlite.create(RunState(run_id="new", updated_at=now), owner="o", now=now, ttl=1.0)
        sqlite.close()

    asyncio.run(seed())
    done = loopstate("store", "prune", "--older-than", "30d", "--db", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "loopstate store prune: removed 1 event-log entries and 0 idempotency answers "
        "older than 30 days\n"
    )
    bad = loopstate("store", "prune", "--older-than", "a month", "--db", str(path), cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "loopstate store prune: error: argument --older-than: 'a month' is not an age: give a "
        "number and a unit, e.g. 30d, 12h, 90m, 45s"
    )
    missing = loopstate("store", "prune", "--older-than", "1d", "--db", str(tmp_path / "no.db"),
                        cwd=tmp_path)  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1
    assert "no store at" in missing.stderr
