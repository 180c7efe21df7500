"""`GET /api/events`, the all-runs stream: each event is an entry of the store-wide log with
its id as the SSE id, so a client that reconnects with `Last-Event-ID` gets exactly what it
missed (same server or one restarted in between); a decision queued by another process (the
CLI) reaches a connected inbox promptly."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from service_support import Sse, read_events, start, stop, wait_for
from support import forking
from test_service_events import approve_all, start_run

from loopstate.engine.store import RunEvent
from loopstate.engine.stores.postgres import PostgresStore
from loopstate.engine.stores.sqlite import SQLiteStore


def logged(db: Path | str) -> list[RunEvent]:
    """The store's event log, read from the store itself."""

    async def read() -> list[RunEvent]:
        if isinstance(db, str):
            postgres = PostgresStore(db)
            try:
                return await postgres.events(after=0, limit=100_000)
            finally:
                await postgres.close()
        sqlite = SQLiteStore(db)
        try:
            return await sqlite.events(after=0, limit=100_000)
        finally:
            sqlite.close()

    return asyncio.run(read())


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    if request.param == "sqlite":
        return tmp_path / "runs.db"
    return str(request.getfixturevalue("postgres_dsn"))


def as_sent(e: RunEvent) -> tuple[str, dict[str, Any]]:
    return str(e.id), e.model_dump(mode="json")


def status_of(run_id: str, status: str) -> Any:
    def reached(event: Sse) -> bool:
        data = json.loads(event.data)
        return bool(data["run_id"] == run_id and data["status"] == status)

    return reached


def test_a_reconnect_with_last_event_id_gets_exactly_the_missed_runs_events(
    db: Path | str, tmp_path: Path
) -> None:
    fx, log = tmp_path / "fx", tmp_path / "log"
    server = start(db, fx, log, LOOPSTATE_TEST_HOLD="0.5")
    with server.client() as client:
        run_id, items = start_run(client)
        waiting = status_of(run_id, "awaiting_approval")
        first = read_events(client, "/api/events", 100, last_event_id="0", until=waiting)
        approve_all(client, items)  # the run moves on while no one listens
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["state"] == "executing_tool")
        middle = read_events(client, "/api/events", 1, last_event_id=first[-1].id)
        assert client.get("/api/events", headers={"Last-Event-ID": "1x"}).status_code == 400
    stop(server)  # the run in hand reaches its end before the process exits
    again = start(db, fx, log, port=int(server.url.rpartition(":")[2]))
    try:
        with again.client() as client:
            done = status_of(run_id, "done")
            rest = read_events(client, "/api/events", 100, last_event_id=middle[-1].id, until=done)
    finally:
        stop(again)
    received = [(e.id, json.loads(e.data)) for e in first + middle + rest]
    assert all(e.event == "run" for e in first + middle + rest)
    assert received == [as_sent(e) for e in logged(db)]
    assert received[-1][1]["status"] == "done"


def test_a_decision_queued_by_another_process_reaches_the_inbox_at_once(tmp_path: Path) -> None:
    db, fx, log = tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log"
    server = start(db, fx, log)
    try:
        with server.client() as client:
            run_id, items = start_run(client)
            charge = next(i for i in items if i["tool"] == "charge")
            before = client.get(f"/api/runs/{run_id}").json()["updated_at"]
            head = str(logged(db)[-1].id)  # the stream starts after it, whenever it opens
            decided: list[float] = []

            def decide_from_the_cli() -> None:
                cli = [sys.executable, "-m", "loopstate", "approve", run_id, charge["call_id"]]
                forking.run([*cli, "--db", str(db)], check=True, capture_output=True)
                decided.append(time.monotonic())

            deciding = threading.Thread(target=decide_from_the_cli)
            with server.client() as listener:
                [event] = read_events(listener, "/api/events", 1, last_event_id=head,
                                      on_open=deciding.start)  # fmt: skip
            seen = time.monotonic()
            deciding.join()
            data = json.loads(event.data)
            assert (data["run_id"], data["queued"], data["pending"]) == (run_id, 1, 2)
            assert data["updated_at"] > before
            # the feed polls the log every 0.25 s: seconds, not a long poll's minute, even when
            # a busy machine starves the server
            assert seen - decided[0] < 20.0
            [email] = client.get("/api/approvals").json()["items"]
            assert email["tool"] == "send_email"
            assert client.get(f"/api/runs/{run_id}").json()["updated_at"] == data["updated_at"]
            cli = [sys.executable, "-m", "loopstate", "approve", run_id, email["call_id"]]
            forking.run([*cli, "--db", str(db)], check=True, capture_output=True)
            decided.append(time.monotonic())  # the batch is decided: this server continues it
            wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
    finally:
        stop(server)


def test_two_servers_writing_at_once_stream_one_log_with_nothing_skipped(
    db: Path | str, tmp_path: Path
) -> None:
    """Runs driven by two processes on one store: a client following one server's stream
    live receives every entry of the log, in id order, once."""
    fx = tmp_path / "fx"
    servers = [start(db, fx, tmp_path / f"log{i}") for i in range(2)]
    clients = [s.client() for s in servers]
    try:
        run_ids: list[str] = []
        finished: set[str] = set()

        def all_done(event: Sse) -> bool:
            data = json.loads(event.data)
            if data["status"] == "done":
                finished.add(data["run_id"])
            return len(run_ids) == 6 and finished >= set(run_ids)

        received: list[Sse] = []
        follow = threading.Thread(
            target=lambda: received.extend(
                read_events(clients[0], "/api/events", 10_000, last_event_id="0", until=all_done)
            )
        )
        follow.start()
        started = [start_run(clients[i % 2]) for i in range(6)]
        run_ids.extend(run_id for run_id, _ in started)  # before any can be done
        for n, (run_id, items) in enumerate(started):
            for k, item in enumerate(items):  # each batch decided through both servers
                path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
                body = {"decision": "approve", "digest": item["digest"]}
                key = {"Idempotency-Key": f"{n}.{k}"}
                assert clients[(n + k) % 2].post(path, json=body, headers=key).is_success
        follow.join(timeout=30)
        assert not follow.is_alive()
        assert [(e.id, json.loads(e.data)) for e in received] == [as_sent(e) for e in logged(db)]
    finally:
        for c in clients:
            c.close()
        for s in servers:
            stop(s)
