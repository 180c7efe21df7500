"""One damaged run never hides the others (issue 26), on SQLite and on PostgreSQL: with one
run's header corrupted, one run's message row deleted, one run from a newer loopstate, and one
ready run whose row was lost, `runs list`, `runs pending`, `/api/runs`, `/api/approvals` and
the worker of a real `loopstate serve` still serve every other run and name the damaged ones;
`runs show` and decisions on a damaged run refuse in one line; its rows are never rewritten."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from service_support import TESTS, TOKEN, start, stop, wait_for
from support import forking

from loopstate import Approve, PostgresStore, Store
from loopstate.engine.operations import queue_decision
from loopstate.engine.stores.sqlite import SQLiteStore

DAMAGED = ("bad-header", "lost-row", "newer", "ready-lost")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-component-update"]
Sql = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Sql]]:
    """(the --db value, the tables' prefix, a function running SQL on the store)."""
    if request.param == "sqlite":
        path = tmp_path / "runs.db"

        def lite(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as db:
                return db.execute(statement.replace("%s", "?"), params).fetchall()

        yield str(path), "", lite
        return
    dsn: str = request.getfixturevalue("postgres_dsn")

    def pg(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn, autocommit=True) as db:
            cursor = db.execute(statement.encode(), params)
            return cursor.fetchall() if cursor.description else []

    yield dsn, "loopstate_", pg


def open_backend(db: str) -> Store:
    return PostgresStore(db) if db.startswith("postgres") else SQLiteStore(db)


async def seed(db: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "effects.txt"))
    import service_agent

    store = open_backend(db)
    agent = service_agent.agent(store)
    for run_id in ("ok-1", *DAMAGED):
        await agent.run("pay the invoice", run_id=run_id)
    for call in (await store.load("ready-lost")).pending:  # decided: the worker claims it
        await queue_decision(store, "ready-lost", call.call_id, Approve(), actor="test")
    closed = store.close()
    if closed is not None:
        await closed


def damage(prefix: str, sql: Sql) -> dict[str, str]:
    """Damage the four runs; the headers of all of them as they are then."""
    runs, messages = f"{prefix}runs", f"{prefix}messages"
    sql(f"UPDATE {runs} SET header = %s WHERE run_id = %s", ("{not json", "bad-header"))
    for run_id in ("lost-row", "ready-lost"):
        sql(f"DELETE FROM {messages} WHERE run_id = %s AND idx = 0", (run_id,))
    ((header,),) = sql(f"SELECT header FROM {runs} WHERE run_id = %s", ("newer",))
    newer = json.dumps({**json.loads(header), "schema_version": 99})
    sql(f"UPDATE {runs} SET header = %s WHERE run_id = %s", (newer, "newer"))
    return headers(prefix, sql)


def headers(prefix: str, sql: Sql) -> dict[str, str]:
    found = sql(f"SELECT run_id, header FROM {prefix}runs ORDER BY run_id", ())
    return {run_id: header for run_id, header in found if run_id in DAMAGED}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forking.run(
        [sys.executable, "-m", "loopstate", *args], capture_output=True, text=True, timeout=60
    )


async def test_one_damaged_run_never_hides_the_others(
    backend: tuple[str, str, Sql], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db, prefix, sql = backend
    await seed(db, monkeypatch, tmp_path)
    before = damage(prefix, sql)

    listing = cli("runs", "list", "--json", "--db", db)
    assert listing.returncode == 0, listing.stderr
    listed = {r["run_id"]: r for r in json.loads(listing.stdout)}
    assert listed["ok-1"]["status"] == "awaiting_approval"
    for run_id in DAMAGED:
        assert listed[run_id]["status"] == "damaged"
        assert run_id in listed[run_id]["problem"]
    assert "newer loopstate" in listed["newer"]["problem"]
    table = cli("runs", "list", "--db", db)
    assert table.returncode == 0, table.stderr
    assert sum("damaged" in line for line in table.stdout.splitlines()) == len(DAMAGED)

    pending = cli("runs", "pending", "--db", db)
    assert pending.returncode == 0, pending.stderr
    assert "ok-1" in pending.stdout
    assert "bad-header is damaged" in pending.stderr

    shown = cli("runs", "show", "bad-header", "--db", db)
    assert shown.returncode == 1
    assert len(shown.stderr.strip().splitlines()) == 1
    assert "bad-header" in shown.stderr
    approve = cli("approve", "lost-row", "call_1", "--db", db)
    assert approve.returncode == 1
    assert len(approve.stderr.strip().splitlines()) == 1

    server = start(db, tmp_path / "effects.txt", tmp_path / "serve.log")
    try:
        with server.client() as client:
            served(client)
        log = tmp_path / "serve.log"
        wait_for(lambda: "worker_run_damaged" in log.read_text())  # named, then skipped
        assert "run_id=ready-lost" in log.read_text()
    finally:
        stop(server)
    assert headers(prefix, sql) == before  # never rewritten


def served(client: httpx.Client) -> None:
    runs = {r["run_id"]: r for r in client.get("/api/runs").json()["items"]}
    assert set(runs) == {"ok-1", *DAMAGED}
    for run_id in DAMAGED:
        assert runs[run_id]["status"] == "damaged"
        assert runs[run_id]["problem"]
    assert "problem" not in runs["ok-1"]
    page = client.get("/api/approvals").json()
    items = page["items"]
    assert {i["run_id"] for i in items} == {"ok-1"}
    assert {d["run_id"] for d in page["damaged"]} == set(DAMAGED)
    one = client.get("/api/approvals", params={"run_id": "bad-header"})
    assert one.status_code == 409
    for run_id in DAMAGED:
        refused = client.get(f"/api/runs/{run_id}")
        assert refused.status_code == 409
        assert refused.headers["content-type"] == "application/problem+json"
        assert "damaged" in refused.json()["detail"]
    decision = client.post(
        "/api/runs/lost-row/calls/call_1/decision",
        json={"decision": "approve", "digest": "x"},
        headers={"Idempotency-Key": "k-lost"},
    )
    assert decision.status_code == 409
    for n, item in enumerate(items):  # the worker still resumes the healthy run
        body = {"decision": "approve", "digest": item["digest"]}
        path = f"/api/runs/ok-1/calls/{item['call_id']}/decision"
        assert client.post(path, json=body, headers={"Idempotency-Key": f"k{n}"}).is_success

    def done() -> bool:
        """the healthy run finished beside a damaged ready one"""
        return bool(client.get("/api/runs/ok-1").json()["status"] == "done")

    wait_for(done)


@pytest.mark.slow
def test_the_inbox_names_a_damaged_run_and_shows_the_others_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import sync_playwright

    db = tmp_path / "runs.db"

    def lite(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with sqlite3.connect(db) as connection:
            return connection.execute(statement.replace("%s", "?"), params).fetchall()

    asyncio.run(seed(str(db), monkeypatch, tmp_path))
    damage("", lite)
    server = start(str(db), tmp_path / "effects.txt", tmp_path / "serve.log")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = browser.new_page()
            page.goto(f"{server.url}/ui/?token={TOKEN}")
            page.wait_for_selector("ul.damaged li", state="attached")
            notes = page.locator("ul.damaged li").all_inner_texts()
            assert len(notes) == len(DAMAGED)
            assert any("run bad-header cannot be read" in note for note in notes)
            assert page.locator("article[data-run='ok-1']").count() == 2
            browser.close()
    finally:
        stop(server)
