"""The service mounted in an app of one's own, served by uvicorn in this process: the
`authorize` hook names the actor (or refuses), and streams keep alive and end on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import service_agent
from fastapi import Request
from service_support import in_uvicorn

from loopstate.engine.errors import StoreError
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service import Action, Service, StreamPolicy


async def by_header(request: Request, action: Action, run_id: str | None) -> str | None:
    """Alice may do anything; Bob may only read."""
    user = request.headers.get("x-user")
    if user == "alice" or (user == "bob" and action == "read"):
        return f"user:{user}"
    return None


@pytest.fixture
async def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("LOOPSTATE_TEST_EFFECTS", str(tmp_path / "fx"))
    store = SQLiteStore(tmp_path / "runs.db")
    service = Service(
        {"payments": service_agent.agent(store)},
        authorize=by_header,
        streams=StreamPolicy(ping_s=0.2, lifetime_s=1.0, retry_ms=250),
    )
    async with in_uvicorn(service) as base:
        yield base
    store.close()


async def test_the_authorize_hook_names_the_actor_in_the_audit_trail(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, headers={"X-User": "alice"}) as alice:
        started = await alice.post("/api/agents/payments/runs", json={"prompt": "pay"})
        run_id = started.json()["run_id"]
        items: list[dict[str, str]] = []
        while len(items) < 2:
            items = (await alice.get("/api/approvals", params={"run_id": run_id})).json()["items"]
        async with httpx.AsyncClient(base_url=url, headers={"X-User": "bob"}) as bob:
            assert (await bob.get(f"/api/runs/{run_id}")).status_code == 200
            item = items[0]
            path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
            body = {"decision": "approve", "digest": item["digest"]}
            refused = await bob.post(path, json=body, headers={"Idempotency-Key": "b"})
            assert refused.status_code == 403
            assert refused.headers["content-type"] == "application/problem+json"
        for item in items:
            path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
            body = {"decision": "approve", "digest": item["digest"]}
            assert (
                await alice.post(path, json=body, headers={"Idempotency-Key": item["call_id"]})
            ).is_success
        run: dict[str, object] = {}
        for _ in range(200):
            run = (await alice.get(f"/api/runs/{run_id}")).json()
            if run["status"] == "done":
                break
            await asyncio.sleep(0.05)
        actors = {t["actor"] for t in run["transitions"]}  # type: ignore[attr-defined]
        assert "user:alice" in actors
        assert {c["decided_by"] for c in run["calls"]} == {"user:alice"}  # type: ignore[attr-defined]


async def test_a_stream_pings_and_ends_after_its_lifetime_with_retry_set(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, headers={"X-User": "alice"}, timeout=5) as alice:
        loop = asyncio.get_running_loop()
        began = loop.time()
        body = b""
        async with alice.stream("GET", "/api/events") as response:
            async for chunk in response.aiter_raw():
                body += chunk
        elapsed = loop.time() - began
    text = body.decode()
    assert "retry: 250" in text
    assert text.count(": ping") >= 2
    assert 0.9 <= elapsed < 10  # ended: pings alone would keep it open for ever


async def test_a_service_on_a_store_it_cannot_use_fails_its_start(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"  # the store named as the wrong file
    notes.write_text("not a database\n")
    store = SQLiteStore(notes)
    service = Service({"payments": service_agent.agent(store)})
    with pytest.raises(StoreError, match="is not a usable loopstate store"):
        async with service.lifespan():  # uvicorn then exits: "Application startup failed"
            pass  # started: it would serve, every request a 500, its loops dead
    assert notes.read_text() == "not a database\n"
