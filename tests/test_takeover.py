"""Takeover without waiting: a claim takes a run whose lease holder is provably gone (SQLite:
a process of this host that no longer exists; PostgreSQL: a session that no longer exists)
at once, though its 30 s lease has not expired; a live holder keeps it; one claimer gets it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import worker_agent
from support import forking
from support.waiting import until

from loopstate import Approve, MemoryStore, PostgresStore, Store
from loopstate.engine.clock import system_clock
from loopstate.engine.operations import queue_decision
from loopstate.engine.stores.sqlite import SQLiteStore

CHILD = Path(__file__).parent / "takeover_child.py"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store: a SQLite file or a PostgreSQL schema."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_dsn"))
    return str(tmp_path / "runs.db")


@pytest.fixture
async def handles(db: str) -> AsyncIterator[Callable[[], Store]]:
    """Opens handles on the store, as separate processes would."""
    opened: list[PostgresStore | SQLiteStore] = []

    def open_handle() -> Store:
        handle = PostgresStore(db) if db.startswith("postgresql") else SQLiteStore(db)
        opened.append(handle)
        return handle

    yield open_handle
    for handle in opened:
        if isinstance(handle, PostgresStore):
            await handle.close()
        else:
            handle.close()


async def test_a_dead_holders_run_is_claimed_at_once_by_one_claimer(
    db: str, handles: Callable[[], Store], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    store = handles()
    suspended = await worker_agent.agent(store).run("go", run_id="r")
    await queue_decision(store, "r", suspended.pending[0].call_id, Approve(), actor="t")
    holder = forking.Popen([sys.executable, str(CHILD), db, "r"], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        now = system_clock()  # fixed: at `now` the holder's 30 s lease never expires
        assert await store.claim(owner="a", now=now, ttl=30.0, limit=5) == []  # it is alive
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    first, second = handles(), handles()

    async def taken() -> list[str]:
        """one claimer took the run (PostgreSQL: once the server saw the session end)"""
        got = await asyncio.gather(
            first.claim(owner="a", now=now, ttl=30.0, limit=5),
            second.claim(owner="b", now=now, ttl=30.0, limit=5),
        )
        return [run_id for claimed in got for run_id in claimed]

    assert await until(taken) == ["r"]  # one holder, never two
    assert await first.claim(owner="c", now=now, ttl=30.0, limit=5) == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_leased_to_an_exited_process_of_this_host_is_claimed_at_once(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    store: Store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "runs.db")
    suspended = await worker_agent.agent(store).run("go", run_id="r")
    await queue_decision(store, "r", suspended.pending[0].call_id, Approve(), actor="t")
    exited = forking.run([sys.executable, "-c", "import os; print(os.getpid())"],
                            capture_output=True, check=True)  # fmt: skip
    gone = f"{socket.gethostname()}:{int(exited.stdout)}:x"
    alive = f"{socket.gethostname()}:{os.getpid()}:y"
    now = system_clock()
    await store.acquire("r", owner=alive, now=now, ttl=30.0)
    assert await store.claim(owner="a", now=now, ttl=30.0, limit=5) == []  # its holder lives
    await store.release("r", owner=alive)
    await store.acquire("r", owner=gone, now=now, ttl=30.0)
    assert await store.claim(owner="a", now=now, ttl=30.0, limit=5) == ["r"]
    assert await store.claim(owner="b", now=now, ttl=30.0, limit=5) == []  # "a" lives
