"""`Idempotency-Key` answers live in the store: a repeat after a restart gets the first answer
(not 409), the same key with another body 422, and a key sent to two server processes on one
store at once is answered once, the same for all."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from service_support import TOKEN, Server, start, stop
from test_service_api import decide, problem, start_run


def test_a_repeat_after_a_restart_gets_the_first_answer(tmp_path: Path) -> None:
    db, fx, log = tmp_path / "runs.db", tmp_path / "fx", tmp_path / "log"
    server = start(db, fx, log)
    with server.client() as client:
        started = client.post(
            "/api/agents/agent/runs", json={"prompt": "pay"}, headers={"Idempotency-Key": "s1"}
        )
        _, items = start_run(client)
        charge = next(i for i in items if i["tool"] == "charge")
        first = decide(client, charge, "k1")
        refused = decide(client, charge, "k2", decision="deny", reason="late")
        assert (first.status_code, refused.status_code) == (200, 409)
    stop(server)
    again = start(db, fx, log)
    try:
        with again.client() as client:
            repeat = decide(client, charge, "k1")
            assert (repeat.status_code, repeat.json()) == (200, first.json())
            assert decide(client, charge, "k2", decision="deny", reason="late").json() == (
                refused.json()
            )  # a refusal is an answer too
            problem(decide(client, charge, "k1", decision="deny", reason="no"), 422)
            restarted = client.post(
                "/api/agents/agent/runs", json={"prompt": "pay"}, headers={"Idempotency-Key": "s1"}
            )
            assert (restarted.status_code, restarted.json()) == (202, started.json())
            problem(
                client.post(
                    "/api/agents/agent/runs", json={"prompt": "other"},
                    headers={"Idempotency-Key": "s1"},
                ),
                422,
            )  # fmt: skip
            runs = client.get("/api/runs", params={"limit": 10}).json()["items"]
            assert len(runs) == 2  # the repeated start started nothing
    finally:
        stop(again)


def test_one_key_sent_to_two_servers_at_once_is_answered_once(tmp_path: Path) -> None:
    db, fx = tmp_path / "runs.db", tmp_path / "fx"
    servers = [start(db, fx, tmp_path / f"log{i}") for i in range(2)]
    try:
        with servers[0].client() as client:
            run_id, items = start_run(client)
        charge = next(i for i in items if i["tool"] == "charge")
        path = f"/api/runs/{run_id}/calls/{charge['call_id']}/decision"
        body = {"decision": "approve", "digest": charge["digest"]}

        async def race(server: Server) -> list[httpx.Response]:
            async with httpx.AsyncClient(
                base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
            ) as c:
                return list(
                    await asyncio.gather(
                        *(c.post(path, json=body, headers={"Idempotency-Key": "same"})
                          for _ in range(5))
                    )
                )  # fmt: skip

        async def both() -> list[httpx.Response]:
            halves = await asyncio.gather(*(race(s) for s in servers))
            return [r for half in halves for r in half]

        answers: list[dict[str, Any]] = [r.json() for r in asyncio.run(both())]
        assert all(a == answers[0] for a in answers)
        assert answers[0]["decision"] == "approve"
        with servers[1].client() as client:
            [queued] = client.get(f"/api/runs/{run_id}").json()["queued"]
            assert queued["call_id"] == charge["call_id"]
    finally:
        for s in servers:
            stop(s)
