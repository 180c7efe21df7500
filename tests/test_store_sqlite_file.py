"""The SQLite store's file (see `test_store_contract` for what all stores share): only what
is new written at each save; corrupt, lost or foreign rows and files refused with an error
naming the run and the row; a file of an older schema migrated."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from support import make_tools
from support.stores import corrupt, suspended_agent

from loopstate import Agent, Approve, ScriptedModel, StoreError
from loopstate.engine.models.scripted import call
from loopstate.engine.operations import queue_decision
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.engine.stores.sqlite_schema import DB_VERSION


async def test_sqlite_stores_only_what_is_new_at_each_save(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    _, tools = make_tools()
    script = [call("read_file", {"path": str(i)}) for i in range(10)] + ["done"]
    await Agent(ScriptedModel(script), tools, store=store, ids=lambda: "r").run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    (messages,) = db.execute("SELECT count(*) FROM messages").fetchone()
    (calls_,) = db.execute("SELECT count(*) FROM calls").fetchone()
    assert (messages, calls_) == (1 + 10 * 2 + 1, 10)
    assert db.execute("SELECT count(*) FROM transitions").fetchone()[0] == 22


async def seeded(tmp_path: Path) -> Path:
    await suspended_agent(SQLiteStore(tmp_path / "runs.db"))[0].run("go")
    return tmp_path / "runs.db"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("UPDATE messages SET body = '{\"role\": \"wizard\"}' WHERE idx = 1",
         r"run run-1: corrupt messages row 1: .*role"),
        ("UPDATE messages SET body = 'not json' WHERE idx = 0",
         r"run run-1: corrupt messages row 0: Invalid JSON"),
        ("UPDATE transitions SET body = json_remove(body, '$.target') WHERE seq = 2",
         r"run run-1: corrupt transitions row 2: Field required at \('target',\)"),
        ("UPDATE calls SET body = json_set(body, '$.status', 'teleported') WHERE position = 1",
         r"run run-1: corrupt calls row 1: .* at \('status',\)"),
        ("UPDATE calls SET body = 42 WHERE position = 0", r"run run-1: corrupt calls row 0"),
        ("UPDATE runs SET header = substr(header, 1, 20)", r"run run-1: corrupt runs row header"),
        ("UPDATE runs SET header = json_set(header, '$.steps', 'many')",
         r"run run-1: corrupt runs row header in .*: .* at \('steps',\)"),
        ("DELETE FROM messages WHERE idx = 0", r"run run-1: 1 messages rows .* header says 2"),
        ("DELETE FROM transitions WHERE seq = 1", r"run run-1: 1 transitions rows .* says 2"),
        ("DELETE FROM calls WHERE position = 1", r"run run-1: 1 calls rows .* header says 2"),
    ],
    ids=["message-invalid", "message-not-json", "transition-invalid", "call-invalid",
         "call-not-text", "header-not-json", "header-invalid", "message-lost",
         "transition-lost", "call-lost"],
)  # fmt: skip
async def test_a_corrupt_row_is_a_store_error_naming_the_run_and_the_row(
    tmp_path: Path, sql: str, message: str
) -> None:
    path = await seeded(tmp_path)
    corrupt(path, sql)
    with pytest.raises(StoreError, match=message):
        await SQLiteStore(path).load("run-1")


async def test_a_corrupt_listing_column_lists_the_run_as_damaged_naming_why(
    tmp_path: Path,
) -> None:
    path = await seeded(tmp_path)
    corrupt(path, "UPDATE runs SET steps = 'many'")
    (listed,) = await SQLiteStore(path).list_runs()
    assert (listed.run_id, listed.status) == ("run-1", "damaged")
    assert re.match(r"run run-1: corrupt runs row in .*runs.db", listed.problem or "")


async def test_a_header_that_is_not_utf8_lists_the_run_as_damaged(tmp_path: Path) -> None:
    path = await seeded(tmp_path)
    corrupt(path, "UPDATE runs SET header = CAST(X'7BFF7D' AS TEXT)")
    (listed,) = await SQLiteStore(path).list_runs()
    assert (listed.run_id, listed.status) == ("run-1", "damaged")
    assert "not UTF-8" in (listed.problem or "")


async def test_a_corrupt_message_row_is_a_clear_error_naming_the_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute('UPDATE messages SET body = \'{"role": "wizard"}\' WHERE idx = 1')
    db.commit()
    with pytest.raises(StoreError, match=r"run run-1: corrupt messages row 1"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_half_written_json_header_is_a_clear_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("UPDATE runs SET header = substr(header, 1, 20)")
    db.commit()
    with pytest.raises(StoreError, match=r"run run-1: corrupt runs row header"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_missing_message_row_is_detected(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("DELETE FROM messages WHERE idx = 0")
    db.commit()
    with pytest.raises(StoreError, match=r"run run-1: 1 messages rows .* header says 2"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_run_from_a_newer_loopstate_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent, _ = suspended_agent(store)
    await agent.run("go")
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("UPDATE runs SET header = json_set(header, '$.schema_version', 99)")
    db.commit()
    with pytest.raises(StoreError, match="run run-1 was written by a newer loopstate"):
        await SQLiteStore(tmp_path / "runs.db").load("run-1")


async def test_a_store_file_from_a_newer_loopstate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {DB_VERSION + 1}")
    db.close()
    newer = rf"runs.db has store schema {DB_VERSION + 1}; .* upgrade loopstate"
    with pytest.raises(StoreError, match=newer):
        await SQLiteStore(path).list_runs()


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable loopstate store"):
        await SQLiteStore(path).list_runs()


async def test_a_sqlite_file_of_schema_1_is_migrated_and_its_ready_runs_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    suspended = await suspended_agent(store)[0].run("go")
    await queue_decision(store, "run-1", suspended.pending[0].call_id, Approve(), actor="t")
    store.close()
    for statement in (  # back to what schema 1 was
        "DROP INDEX runs_ready", "ALTER TABLE runs DROP COLUMN ready", "DROP TABLE events",
        "DROP TABLE answers", "DROP INDEX runs_by_updated", "DROP INDEX runs_by_created",
        "DROP TABLE pruned", "ALTER TABLE runs DROP COLUMN revision", "PRAGMA user_version = 1",
    ):  # fmt: skip
        corrupt(path, statement)
    assert await SQLiteStore(path).claim(owner="w", now=1e12, ttl=1.0, limit=5) == ["run-1"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (DB_VERSION,)
