"""An external tool's result over real HTTP (`POST .../calls/{call_id}/result`) to the service
served by uvicorn on 127.0.0.1 with a SQLite store: validated against the declared result
type (422, field by field), refused for a call not awaiting one (409), once per
Idempotency-Key, and the run finishes with the value as the call's result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from service_support import in_uvicorn
from support import charge

from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service import Service


class Choice(BaseModel):
    colour: str
    count: int


@tool(external=True)
def pick_in_browser(prompt: str) -> Choice:
    """Let the user pick in their browser (a client-side tool)."""
    raise AssertionError("an external tool's body never runs")


def agent(store: SQLiteStore) -> Agent:
    script = [
        calls(call("pick_in_browser", {"prompt": "which?"}), call("charge", {"amount": 5})),
        "thanks",
    ]
    return Agent(ScriptedModel(script, by_step=True), [pick_in_browser, charge], store=store)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SQLiteStore(tmp_path / "runs.db")
    service = Service({"shop": agent(store)})
    async with (
        in_uvicorn(service) as base,
        httpx.AsyncClient(base_url=base, timeout=10) as c,
    ):
        yield c
    store.close()


async def waiting(client: httpx.AsyncClient) -> tuple[str, dict[str, Any], dict[str, Any]]:
    started = await client.post("/api/agents/shop/runs", json={"prompt": "buy"})
    run_id = started.json()["run_id"]
    for _ in range(500):
        items = (await client.get("/api/approvals", params={"run_id": run_id})).json()["items"]
        if len(items) == 2:
            by_tool = {i["tool"]: i for i in items}
            return run_id, by_tool["pick_in_browser"], by_tool["charge"]
        await asyncio.sleep(0.02)
    raise AssertionError("the run never waited")


def result_path(run_id: str, item: dict[str, Any]) -> str:
    return f"/api/runs/{run_id}/calls/{item['call_id']}/result"


async def test_a_result_over_http_is_validated_recorded_once_and_finishes_the_run(
    client: httpx.AsyncClient,
) -> None:
    run_id, pick, charge_item = await waiting(client)
    assert (pick["external"], charge_item["external"]) == (True, False)
    path = result_path(run_id, pick)

    bad = await client.post(path, json={"value": {"colour": "red", "count": "many"}},
                            headers={"Idempotency-Key": "r0"})  # fmt: skip
    assert bad.status_code == 422
    assert bad.headers["content-type"] == "application/problem+json"
    assert bad.json()["errors"] == [
        {"field": "value.count", "message": "'many' is not of type 'integer'"}
    ]
    no_key = await client.post(path, json={"value": {"colour": "red", "count": 2}})
    assert no_key.status_code == 400
    approve = await client.post(
        f"/api/runs/{run_id}/calls/{pick['call_id']}/decision",
        json={"decision": "approve", "digest": pick["digest"]},
        headers={"Idempotency-Key": "d0"},
    )
    assert approve.status_code == 409  # an external call takes a result, not an approval
    assert "does not accept 'approve'" in approve.json()["detail"]

    value = {"colour": "red", "count": 2}
    first = await client.post(path, json={"value": value}, headers={"Idempotency-Key": "r1"})
    assert first.status_code == 200, first.text
    assert first.json()["continues"] is False  # charge still waits for a decision
    again = await client.post(path, json={"value": value}, headers={"Idempotency-Key": "r1"})
    assert again.json() == first.json()  # the same key: the first answer
    other = await client.post(path, json={"value": value}, headers={"Idempotency-Key": "r2"})
    assert other.status_code == 409
    assert "already has its result" in other.json()["detail"]

    decided = await client.post(
        f"/api/runs/{run_id}/calls/{charge_item['call_id']}/decision",
        json={"decision": "approve", "digest": charge_item["digest"]},
        headers={"Idempotency-Key": "d1"},
    )
    assert decided.json()["continues"] is True
    for _ in range(500):
        run = (await client.get(f"/api/runs/{run_id}")).json()
        if run["status"] == "done":
            break
        await asyncio.sleep(0.02)
    assert run["status"] == "done"
    calls_by_tool = {c["tool"]: c for c in run["calls"]}
    assert calls_by_tool["pick_in_browser"]["status"] == "succeeded"
    assert calls_by_tool["pick_in_browser"]["decision"] == "result"
    tool_messages = [m["content"] for m in run["messages"] if m["role"] == "tool"]
    assert tool_messages == ['{"colour":"red","count":2}', "charged 5"]
    late = await client.post(path, json={"value": value}, headers={"Idempotency-Key": "r3"})
    assert late.status_code == 409
    assert "not awaiting a result" in late.json()["detail"]


async def test_a_result_for_a_call_that_does_not_take_one_is_refused(
    client: httpx.AsyncClient,
) -> None:
    run_id, _, charge_item = await waiting(client)
    key = {"Idempotency-Key": "x"}
    gated = await client.post(result_path(run_id, charge_item), json={"value": 1}, headers=key)
    assert gated.status_code == 409
    assert "not an external tool's call" in gated.json()["detail"]
    unknown = await client.post(f"/api/runs/{run_id}/calls/nope/result", json={"value": 1},
                                headers={"Idempotency-Key": "y"})  # fmt: skip
    assert unknown.status_code == 404
    missing = await client.post(result_path(run_id, charge_item), json={},
                                headers={"Idempotency-Key": "z"})  # fmt: skip
    assert missing.status_code == 422
