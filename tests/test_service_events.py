"""SSE: a client that disconnects mid-run and reconnects with `Last-Event-ID` receives the
run's stored transitions exactly once, from the same server or one restarted in between."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
from service_support import read_events, start, stop, wait_for


def start_run(client: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    run_id = client.post("/api/agents/agent/runs", json={"prompt": "pay"}).json()["run_id"]
    items = wait_for(
        lambda: client.get("/api/approvals", params={"run_id": run_id}).json()["items"]
    )
    return run_id, items


def approve_all(client: httpx.Client, items: list[dict[str, Any]]) -> None:
    for item in items:
        path = f"/api/runs/{item['run_id']}/calls/{item['call_id']}/decision"
        body = {"decision": "approve", "digest": item["digest"]}
        assert client.post(path, json=body, headers={"Idempotency-Key": item["call_id"]}).is_success


def stored(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    return list(client.get(f"/api/runs/{run_id}").json()["transitions"])


def received(events: list[Any]) -> list[dict[str, Any]]:
    out = []
    for e in (e for e in events if e.event == "transition"):
        data = json.loads(e.data)
        assert e.event == "transition"
        assert e.id == str(data["seq"])
        out.append({k: v for k, v in data.items() if k != "status"})
    return out


def test_a_reconnect_with_last_event_id_gets_exactly_what_it_missed(tmp_path: Path) -> None:
    server = start(
        tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log", LOOPSTATE_TEST_HOLD="0.5"
    )
    try:
        with server.client() as client:
            run_id, items = start_run(client)
            path = f"/api/runs/{run_id}/events"
            first = read_events(client, path, 50, until=second)  # to thinking, to awaiting_approval
            approve_all(client, items)  # the run moves on while no one listens
            wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["state"] == "executing_tool")
            rest = read_events(client, path, 50, last_event_id=first[-1].id, until=answered)
            assert received(first + rest) == stored(client, run_id)
            assert [e.id for e in first + rest if e.id] == ["1", "2", "3", "4", "5"]
    finally:
        stop(server)


def test_a_reconnect_to_a_restarted_server_misses_nothing(tmp_path: Path) -> None:
    db, fx, log = tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log"
    server = start(db, fx, log, LOOPSTATE_TEST_HOLD="0.5")
    with server.client() as client:
        run_id, items = start_run(client)
        first = read_events(client, f"/api/runs/{run_id}/events", 50, until=second)
        approve_all(client, items)
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["state"] == "executing_tool")
    stop(server, signal.SIGTERM)  # the run in hand reaches its end before the process exits
    again = start(db, fx, log, port=int(server.url.rpartition(":")[2]))
    try:
        with again.client() as client:
            path = f"/api/runs/{run_id}/events"
            rest = read_events(client, path, 50, last_event_id=first[-1].id, until=answered)
            assert received(first + rest) == stored(client, run_id)
            assert [e.id for e in first + rest if e.id] == ["1", "2", "3", "4", "5"]
    finally:
        stop(again)


def test_a_stream_says_when_to_reconnect_and_echoes_no_credentials(tmp_path: Path) -> None:
    from service_support import TOKEN

    server = start(tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log")
    try:
        with server.client() as client:
            run_id, _ = start_run(client)
            with client.stream("GET", f"/api/runs/{run_id}/events") as response:
                head = b""
                for chunk in response.iter_raw():
                    head += chunk
                    if b"id: 2" in head:
                        break
            text = head.decode()
            assert "retry: 1000" in text
            assert "id: 1" in text
            assert TOKEN not in text
            assert "Bearer" not in text
            bad = client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"})
            assert bad.status_code == 400
            assert client.get("/api/runs/none/events").status_code == 404
    finally:
        stop(server)


def test_a_run_stream_forwards_the_model_text_live_without_ids(tmp_path: Path) -> None:
    server = start(tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log")
    try:
        with server.client() as client:
            run_id, items = start_run(client)
            approve_all(client, items)
            wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
            seen = str(len(stored(client, run_id)))

            def follow_up() -> None:
                client.post(f"/api/runs/{run_id}/messages", json={"text": "thanks"})

            sender = threading.Thread(target=follow_up)  # once the stream below follows the run
            with server.client() as listener:
                path = f"/api/runs/{run_id}/events"
                events = read_events(listener, path, 50, last_event_id=seen, until=answered,
                                     on_open=sender.start)  # fmt: skip
            sender.join()
        deltas = [e for e in events if e.event == "text_delta"]
        assert "".join(json.loads(e.data)["text"] for e in deltas) == "glad to help"
        assert all(e.id is None for e in deltas)
        moves = [json.loads(e.data)["to"] for e in events if e.event == "transition"]
        assert moves == ["thinking", "done"]
        assert events[0].event == "transition"
        assert events[-1].event == "transition"
    finally:
        stop(server)


def answered(event: Any) -> bool:
    return event.event == "transition" and json.loads(event.data)["to"] == "done"


def second(event: Any) -> bool:
    return event.id == "2"
