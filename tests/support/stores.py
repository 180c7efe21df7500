"""The store contract's fixtures and helpers, shared by `test_store_*`: the same tests run
against MemoryStore, SQLiteStore and PostgresStore (started by the `postgres_dsn` fixture)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from loopstate import Agent, MemoryStore, PostgresStore, ScriptedModel, Store
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.stores.sqlite import SQLiteStore
from support import make_tools


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def handles(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Store]]:
    """Opens handles on one store; two handles act as two processes would (memory: one)."""
    opened: list[Store] = []
    memory = MemoryStore()
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else ""

    def open_handle() -> Store:
        handle: Store = {
            "memory": lambda: memory,
            "sqlite": lambda: SQLiteStore(tmp_path / "runs.db"),
            "postgres": lambda: PostgresStore(dsn),
        }[request.param]()
        opened.append(handle)
        return handle

    yield open_handle
    for handle in opened:
        if isinstance(handle, PostgresStore):
            await handle.close()
        elif isinstance(handle, SQLiteStore):
            handle.close()


@pytest.fixture
def store(handles: Callable[[], Store]) -> Store:
    return handles()


def suspended_agent(store, script=None) -> tuple[Agent, object]:
    counted, tools = make_tools()
    script = script or [
        calls(call("read_file", {"path": "a"}), call("write_file", {"path": "b", "content": "x"})),
        "done",
    ]
    return Agent(ScriptedModel(script), tools, store=store, ids=lambda: "run-1"), counted


def corrupt(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()
