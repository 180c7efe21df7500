"""Several `loopstate serve` processes on one store: decisions sent to either one, every run
is continued once (under its lease, through `claim`) and each charge runs once; a server with
SSE clients connected stops promptly on SIGTERM."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_support import read_events, start, stop, wait_for
from support import forking

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("postgres_dsn"))


def test_two_servers_on_one_store_continue_each_run_once(db: str, tmp_path: Path) -> None:
    fx = tmp_path / "fx"
    servers = [
        start(Path(db) if "://" not in db else db, fx, tmp_path / f"log{i}") for i in range(2)
    ]
    try:
        clients = [s.client() for s in servers]
        run_ids = [
            clients[i % 2].post("/api/agents/agent/runs", json={"prompt": "pay"}).json()["run_id"]
            for i in range(10)
        ]
        for n, run_id in enumerate(run_ids):
            items: list[dict[str, Any]] = wait_for(
                lambda r=run_id: (
                    clients[0].get("/api/approvals", params={"run_id": r}).json()["items"]
                )
            )
            for k, item in enumerate(items):  # the batch's decisions split over both servers
                c = clients[(n + k) % 2]
                path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
                body = {"decision": "approve", "digest": item["digest"]}
                assert c.post(path, json=body, headers={"Idempotency-Key": f"{n}{k}"}).is_success

        def all_done() -> bool:
            """every run is done"""
            runs = clients[1].get("/api/runs", params={"status": "done", "limit": 100}).json()
            return len(runs["items"]) == 10

        wait_for(all_done)
        charges = sorted(line.split()[0] for line in fx.read_text().splitlines())
        assert charges == sorted(run_ids)
    finally:
        for c in clients:
            c.close()
        for s in servers:
            stop(s)


def test_a_server_with_streams_open_stops_promptly(tmp_path: Path) -> None:
    server = start(tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log")
    with server.client() as client:
        run_id = client.post("/api/agents/agent/runs", json={"prompt": "pay"}).json()["run_id"]
        streams = [httpx.Client(base_url=server.url, headers=client.headers) for _ in range(3)]
        opened = [
            s.stream("GET", f"/api/runs/{run_id}/events").__enter__() for s in streams[:2]
        ] + [streams[2].stream("GET", "/api/events").__enter__()]
        assert all(r.status_code == 200 for r in opened)
        read_events(client, f"/api/runs/{run_id}/events", 1)
        began = time.monotonic()
        stop(server, signal.SIGTERM)
        # measured: 0.2 s; a graceful shutdown would wait for the open streams for ever
        assert time.monotonic() - began < 10
        # uvicorn re-raises the signal once it has shut down cleanly
        assert server.process.returncode == -signal.SIGTERM
        assert "Traceback" not in server.log.read_text()
        for s in streams:
            s.close()


def test_the_demo_serves_its_waiting_write_in_the_inbox(tmp_path: Path) -> None:
    import os
    import sys

    from service_support import TOKEN, free_port

    port = free_port()
    env = {**os.environ, "LOOPSTATE_TOKEN": TOKEN}
    log = (tmp_path / "demo.log").open("wb")
    process = forking.Popen(
        [sys.executable, "-m", "loopstate", "demo", "--serve", "--port", str(port)],
        env=env, stdout=log, stderr=log, cwd=tmp_path,
    )  # fmt: skip
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as c:

            def waiting() -> list[dict[str, Any]]:
                """the demo's write is in the inbox"""
                assert process.poll() is None, (tmp_path / "demo.log").read_text()
                try:
                    return list(c.get("/api/approvals").json()["items"])
                except httpx.TransportError:
                    return []

            [item] = wait_for(waiting)
            assert item["tool"] == "write"
            assert item["arguments"]["path"] == "notes.md"
            assert "-The agent loop is drivn by" in item["diff"]  # what approving will do
            assert item["agent"] == "demo"
            assert item["description"].startswith("Create or")
            path = f"/api/runs/{item['run_id']}/calls/{item['call_id']}/decision"
            body = {"decision": "approve", "digest": item["digest"]}
            assert c.post(path, json=body, headers={"Idempotency-Key": "d"}).is_success
            wait_for(lambda: c.get(f"/api/runs/{item['run_id']}").json()["status"] == "done")
        notes = tmp_path / ".loopstate" / "demo-workspace" / "notes.md"
        assert "driven by" in notes.read_text()
        assert not (tmp_path / ".loopstate" / "runs.db").exists()  # its own temporary store
    finally:
        process.terminate()
        process.wait(15)
        log.close()
