"""Pruning aware of every process's stream clients: each service process publishes the
lowest log id its connected all-runs clients still need (`Prunable.keep_cursor`), and a prune
from the CLI or from `Service(retention_s=)` in any process keeps what follows it; a cursor a
process stopped publishing (it died) holds nothing back once it is stale."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import worker_agent
from service_support import TESTS, TOKEN, Server, free_port, start, stop
from support import forking
from support.waiting import until
from test_service_retention import next_events

from loopstate import PostgresStore, SQLiteStore
from loopstate.engine.clock import system_clock
from loopstate.engine.store import CURSOR_TTL_S, Prunable

STREAM = {"Accept": "text/event-stream", "Authorization": f"Bearer {TOKEN}"}


def prune_cli(db: str) -> str:
    """`loopstate store prune --older-than 0s` (everything is old enough) in a process."""
    done = forking.run(
        [sys.executable, "-m", "loopstate", "store", "prune", "--older-than", "0s", "--db", db],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def serve(postgres_dsn: str, tmp_path: Path, *retention: str) -> Server:
    """A service process (`cursor_server`): without `retention`, one whose clients are not
    sent what others write until it looks; with it, one that prunes at start."""
    port = free_port()
    script = (str(TESTS / "cursor_server.py"), str(port), postgres_dsn, *retention)
    return start(postgres_dsn, tmp_path / "effects.txt", tmp_path / "serve.log", port,
                 command=script)  # fmt: skip


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """The service processes a test started (`serve`), stopped when it ends."""
    running: list[Server] = []
    try:
        yield running
    finally:
        for server in running:
            if server.process.poll() is None:
                stop(server)


async def suspended(store: PostgresStore | SQLiteStore, *names: str) -> int:
    """Runs waiting for a decision, written by this process; the log's last id then."""
    agent = worker_agent.agent(store)
    for name in names:
        await agent.run("go", run_id=name)
    return await store.last_event_id()


async def test_a_prune_elsewhere_keeps_what_a_client_of_another_process_was_not_sent(
    servers: list[Server], postgres_dsn: str, tmp_path: Path
) -> None:
    store = PostgresStore(postgres_dsn)
    servers.append(slow := serve(postgres_dsn, tmp_path))
    seen = await suspended(store, "a", "b")
    async with httpx.AsyncClient(timeout=30) as client:
        live = client.stream("GET", f"{slow.url}/api/events", headers=STREAM)
        async with live as stream:  # from the log's end: it still needs all after `seen`
            lines = stream.aiter_lines()
            assert (await anext(lines)).startswith(":")  # open: its cursor is published
            written = await suspended(store, "c", "d")  # not sent yet: `slow` looks hourly
            # another service process, `Service(retention_s=0)`: everything is old to it
            servers.append(pruning := serve(postgres_dsn, tmp_path, "0"))
            await until(lambda: store.pruned_upto())  # it pruned when it started
            assert await store.pruned_upto() == seen  # what the client was sent, no more
            kept = [e.id for e in await store.events(after=0)]
            assert kept == list(range(seen + 1, written + 1))
            assert "removed 0 event-log entries" in prune_cli(postgres_dsn)  # the CLI: same
        after = {**STREAM, "Last-Event-ID": str(seen)}
        async with client.stream("GET", f"{pruning.url}/api/events", headers=after) as again:
            got = await next_events(again.aiter_lines(), len(kept))
            assert [(int(i), kind) for i, kind, _ in got] == [(i, "run") for i in kept]  # no gap
    await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, Prunable]]:
    if request.param == "sqlite":
        sqlite = SQLiteStore(tmp_path / "runs.db")
        yield str(sqlite.path), sqlite
        sqlite.close()
        return
    dsn = request.getfixturevalue("postgres_dsn")
    postgres = PostgresStore(dsn)
    yield dsn, postgres
    await postgres.close()


async def test_a_stale_cursor_holds_nothing_back_and_a_live_one_keeps_what_follows_it(
    store: tuple[str, Prunable],
) -> None:
    db, prunable = store
    assert isinstance(prunable, PostgresStore | SQLiteStore)
    last = await suspended(prunable, "a", "b")
    now = system_clock()
    # a process that died a while ago: its cursor was last published two lifetimes back
    await prunable.keep_cursor("elsewhere:1:dead", 0, now=now - 2 * CURSOR_TTL_S, ttl=CURSOR_TTL_S)
    assert await prunable.keep_cursor("elsewhere:2:live", 2, now=now, ttl=CURSOR_TTL_S) == 0
    assert "removed 2 event-log entries" in prune_cli(db)
    assert [e.id for e in await prunable.events(after=0)] == list(range(3, last + 1))
    assert await prunable.keep_cursor("elsewhere:2:live", None, now=now, ttl=CURSOR_TTL_S) == 2
    pruned = await prunable.prune(before=system_clock())  # none holds the rest back now
    assert pruned.events == last - 2
    assert await prunable.events(after=0) == []
