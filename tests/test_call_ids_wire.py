"""Call ids over real HTTP (issue 26): a model's call id that is not one safe URL path segment
(`..`) gets a run-unique `call_N` that the inbox and the API decide by, while the model is
answered under its own id; a call the reply repeats (same id, tool and arguments) runs once and
is answered once on the wire."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from model_server import serve, text_reply, tool_call_reply
from service_support import in_uvicorn

from loopstate import Agent, tool
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service import Service

RUNS: list[int] = []


@tool
def count(n: int) -> str:
    """Count a call."""
    RUNS.append(n)
    return f"counted {n}"


@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge a card."""
    return f"charged {amount}"


async def test_a_call_repeated_in_one_reply_runs_once_and_is_answered_once(
    tmp_path: Path,
) -> None:
    RUNS.clear()
    with serve(
        tool_call_reply(("call_a", "count", {"n": 1}), ("call_a", "count", {"n": 1})),
        text_reply("done"),
    ) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="sk-test")
        result = await Agent(model, [count], store=SQLiteStore(tmp_path / "r.db")).run("go")
        wire = server.bodies[1]["messages"]
    assert result.status == "done", result.error
    assert RUNS == [1]
    (asked,) = [m for m in wire if m["role"] == "assistant"]
    assert [c["id"] for c in asked["tool_calls"]] == ["call_a"]
    assert [m["tool_call_id"] for m in wire if m["role"] == "tool"] == ["call_a"]


async def test_a_dot_dot_call_id_is_decided_over_http_and_answered_under_its_own_id(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    with serve(tool_call_reply(("..", "charge", {"amount": 5})), text_reply("paid")) as model:
        llm = LiteLLMModel("openai/test-model", api_base=model.openai_base, api_key="sk-test")
        service = Service({"shop": Agent(llm, [charge], store=store)})
        async with (
            in_uvicorn(service) as base,
            httpx.AsyncClient(base_url=base, timeout=10) as c,
        ):
            run_id = (await c.post("/api/agents/shop/runs", json={"prompt": "pay"})).json()[
                "run_id"
            ]
            item = await _pending(c, run_id)
            assert item["call_id"] == "call_1"
            path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
            body = {"decision": "approve", "digest": item["digest"]}
            decided = await c.post(path, json=body, headers={"Idempotency-Key": "k"})
            assert decided.status_code == 200, decided.text
            assert (await _ended(c, run_id))["status"] == "done"
        wire = model.bodies[1]["messages"]
    store.close()
    (asked,) = [m for m in wire if m["role"] == "assistant"]
    assert [c["id"] for c in asked["tool_calls"]] == [".."]
    assert [m["tool_call_id"] for m in wire if m["role"] == "tool"] == [".."]


async def _pending(client: httpx.AsyncClient, run_id: str) -> dict[str, object]:
    for _ in range(6000):  # 2 min: a margin for a loaded machine, not a time relied on
        items = (await client.get("/api/approvals", params={"run_id": run_id})).json()["items"]
        if items:
            item: dict[str, object] = items[0]
            return item
        await asyncio.sleep(0.02)
    raise AssertionError("the call never waited")


async def _ended(client: httpx.AsyncClient, run_id: str) -> dict[str, object]:
    for _ in range(6000):  # 2 min: a margin for a loaded machine, not a time relied on
        run: dict[str, object] = (await client.get(f"/api/runs/{run_id}")).json()
        if run["status"] in ("done", "failed", "aborted"):
            return run
        await asyncio.sleep(0.02)
    raise AssertionError("the run never ended")
