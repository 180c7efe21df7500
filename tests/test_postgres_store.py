"""What only PostgresStore has: its migrations, SQL corruption, DSN redaction, the CLI on it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from support import make_tools
from support.cli import loopstate

from loopstate import Agent, Approve, PostgresStore, ScriptedModel, StoreError
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.operations import queue_decision
from loopstate.engine.stores.postgres_schema import DB_VERSION


async def seeded(dsn: str) -> None:
    _, tools = make_tools()
    write = call("write_file", {"path": "b", "content": "x"})
    script = [calls(call("read_file", {"path": "a"}), write), "ok"]
    store = PostgresStore(dsn)
    await Agent(ScriptedModel(script), tools, store=store, ids=lambda: "run-1").run("go")
    await store.close()


def sql(dsn: str, statement: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(statement)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("UPDATE loopstate_messages SET body = '{\"role\": \"wizard\"}' WHERE idx = 1",
         r"run run-1: corrupt messages row 1: .*role"),
        ("UPDATE loopstate_transitions SET body = (body::jsonb - 'target')::text WHERE seq = 2",
         r"run run-1: corrupt transitions row 2: Field required at \('target',\)"),
        ("UPDATE loopstate_calls SET body = jsonb_set(body::jsonb, '{status}', '\"gone\"')::text "
         "WHERE position = 1", r"run run-1: corrupt calls row 1: .* at \('status',\)"),
        ("UPDATE loopstate_runs SET header = substr(header, 1, 20)",
         r"run run-1: corrupt runs row header"),
        ("DELETE FROM loopstate_transitions WHERE seq = 1",
         r"run run-1: 1 transitions rows in postgresql://postgres@127.0.0.1:\d+/\w+\?.*says 2"),
        ("UPDATE loopstate_runs SET header = "
         "jsonb_set(header::jsonb, '{schema_version}', '99')::text",
         r"run run-1 was written by a newer loopstate .*: upgrade loopstate"),
    ],
    ids=["message-invalid", "transition-invalid", "call-invalid", "header-not-json",
         "transition-lost", "newer-run"],
)  # fmt: skip
async def test_a_corrupt_row_is_a_store_error_naming_the_run_and_the_database(
    postgres_dsn: str, statement: str, message: str
) -> None:
    await seeded(postgres_dsn)
    sql(postgres_dsn, statement)
    store = PostgresStore(postgres_dsn)
    with pytest.raises(StoreError, match=message):
        await store.load("run-1")
    await store.close()


async def test_a_database_migrated_by_a_newer_loopstate_is_refused(postgres_dsn: str) -> None:
    await seeded(postgres_dsn)
    sql(postgres_dsn, "UPDATE loopstate_schema SET version = 9")
    store = PostgresStore(postgres_dsn)
    with pytest.raises(StoreError, match=rf"has store schema 9; .* up to {DB_VERSION}: upgrade"):
        await store.list_runs()


async def test_a_database_of_schema_1_is_migrated_and_its_ready_runs_found(
    postgres_dsn: str,
) -> None:
    await seeded(postgres_dsn)  # suspended on write_file
    store = PostgresStore(postgres_dsn)
    state = await store.load("run-1")
    await queue_decision(store, "run-1", state.pending[0].call_id, Approve(), actor="t")
    await store.close()
    for statement in (  # back to what schema 1 was
        "DROP INDEX loopstate_runs_ready", "ALTER TABLE loopstate_runs DROP COLUMN ready",
        "DROP TABLE loopstate_events", "DROP TABLE loopstate_answers",
        "DROP INDEX loopstate_runs_by_updated", "DROP INDEX loopstate_runs_by_created",
        "ALTER TABLE loopstate_runs DROP COLUMN lease_session", "DROP TABLE loopstate_pruned",
    ):  # fmt: skip
        sql(postgres_dsn, statement)
    sql(postgres_dsn, "UPDATE loopstate_schema SET version = 1")
    store = PostgresStore(postgres_dsn)
    assert await store.claim(owner="w", now=1e12, ttl=1.0, limit=5) == ["run-1"]
    await store.close()
    with psycopg.connect(postgres_dsn) as db:
        assert db.execute("SELECT version FROM loopstate_schema").fetchall() == [(DB_VERSION,)]


async def test_a_database_of_schema_2_is_migrated_and_its_runs_logged_from_then_on(
    postgres_dsn: str,
) -> None:
    await seeded(postgres_dsn)  # suspended on write_file
    for statement in (  # back to what schema 2 was
        "DROP TABLE loopstate_events", "DROP TABLE loopstate_answers",
        "DROP INDEX loopstate_runs_by_updated", "DROP INDEX loopstate_runs_by_created",
        "ALTER TABLE loopstate_runs DROP COLUMN lease_session", "DROP TABLE loopstate_pruned",
        "ALTER TABLE loopstate_runs DROP COLUMN revision",
        "UPDATE loopstate_schema SET version = 2",
    ):  # fmt: skip
        sql(postgres_dsn, statement)
    store = PostgresStore(postgres_dsn)
    assert await store.last_event_id() == 0  # nothing was logged before the log existed
    state = await store.load("run-1")
    await queue_decision(store, "run-1", state.pending[0].call_id, Approve(), actor="t")
    [event] = await store.events(after=0)
    assert (event.run_id, event.queued, event.pending) == ("run-1", 1, 1)
    assert [r.run_id for r in await store.list_runs(by="created")] == ["run-1"]
    assert await store.reserve_key("k", "f", now=1.0, stale_s=5.0) is None
    await store.close()
    with psycopg.connect(postgres_dsn) as db:
        assert db.execute("SELECT version FROM loopstate_schema").fetchall() == [(DB_VERSION,)]


async def test_errors_name_the_database_but_never_its_password() -> None:
    store = PostgresStore("postgresql://app:s3cret@127.0.0.1:1/runs?connect_timeout=5")
    with pytest.raises(StoreError) as raised:
        await store.load("run-1")
    assert str(raised.value).startswith("cannot connect to postgresql://app@127.0.0.1:1/runs")
    assert "s3cret" not in str(raised.value) + repr(store)
    keyword = PostgresStore("host=127.0.0.1 port=1 dbname=runs user=app password=s3cret")
    assert keyword.where == "postgresql://app@127.0.0.1:1/runs"


async def test_the_cli_lists_and_decides_runs_in_postgres(postgres_dsn: str) -> None:
    await seeded(postgres_dsn)
    here = Path.cwd()
    listing = loopstate("runs", "list", "--db", postgres_dsn, cwd=here)
    assert listing.stdout.splitlines()[1].split()[:4:2] == ["run-1", "awaiting_approval"], (
        listing.stderr
    )
    store = PostgresStore(postgres_dsn)
    call_id = (await store.load("run-1")).pending[0].call_id
    approve = loopstate("approve", "run-1", call_id, "--db", postgres_dsn, cwd=here)
    assert approve.returncode == 0, approve.stderr
    assert [q.call_id for q in (await store.load("run-1")).inbox] == [call_id]
    await store.close()
