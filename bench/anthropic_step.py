"""A real Anthropic step at wire speed: `bench/real_step.py`'s measurement, in Anthropic's format.

    python bench/anthropic_step.py [REPEATS]

The same instant server (`bench/wire_server.py`, its own process) answers `POST
/h{N}/v1/messages` with a `tool_use` until the request carries N-1 `tool_result` blocks. At
history 5, 25, 100 and 200 steps, per model call, ms of CPU and wall as ratios to the raw POST:

- raw httpx: the same Anthropic request (system, tools, tool_choice, max_tokens, the history's
  `tool_use` / `tool_result` blocks), `json.dumps`, `POST`, `json.loads` (floor);
- `litellm.acompletion` alone with `anthropic/claude-sonnet-4-5` (priced: its cost computed);
- loopstate: `Agent` + `LiteLLMModel` + `MemoryStore` (the fast path of
  `engine/models/provider_path.py` after each shape's first call), and with `direct=False`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from real_step import TOOLS, Variant, echo, medians, report, wire_server

from loopstate import Agent, LiteLLMModel, MemoryStore
from loopstate.engine.models.litellm import _import_litellm

MODEL = "anthropic/claude-sonnet-4-5"
SYSTEM = "You echo."
_clients: list[httpx.AsyncClient] = []


def _results(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "1"}
        for b in content
        if b["type"] == "tool_use"
    ]


async def raw_httpx(base: str, steps: int) -> None:
    if not _clients:
        _clients.append(httpx.AsyncClient())
    tool = TOOLS[0]["function"]
    fixed = {
        "model": "claude-sonnet-4-5",
        "tools": [{"name": tool["name"], "description": tool["description"],
                   "input_schema": tool["parameters"]}],
        "tool_choice": {"type": "auto"},
        "system": [{"type": "text", "text": SYSTEM}],
        "max_tokens": 64000,
    }  # fmt: skip
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01",
               "content-type": "application/json"}  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    url = f"{base.removesuffix('/v1')}/v1/messages"
    content: list[dict[str, Any]] = []
    for _ in range(steps):
        body = {**fixed, "messages": messages}
        response = await _clients[0].post(url, content=json.dumps(body), headers=headers)
        content = json.loads(response.content)["content"]
        messages.append({"role": "assistant", "content": content})
        if results := _results(content):
            messages.append({"role": "user", "content": results})
    assert content[-1].get("text") == "Done.", content


async def litellm_alone(base: str, steps: int) -> None:
    litellm = _import_litellm()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "go"}
    ]  # fmt: skip
    for _ in range(steps):
        reply = await litellm.acompletion(
            model=MODEL, api_base=base.removesuffix("/v1"), api_key="k", messages=messages,
            tools=TOOLS, tool_choice="auto", num_retries=0, _skip_mcp_handler=True,
        )  # fmt: skip
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        messages.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": "1"}
            for c in message.get("tool_calls") or ()
        )
    assert messages[-1]["content"] == "Done.", messages[-1]


async def loopstate(base: str, steps: int, *, direct: bool = True) -> None:
    model = LiteLLMModel(MODEL, api_base=base.removesuffix("/v1"), api_key="k", direct=direct)
    agent = Agent(model, [echo], instructions=SYSTEM, store=MemoryStore(), max_steps=10**6)
    result = await agent.run("go")
    assert (result.status, result.steps) == ("done", steps), result
    assert result.usage.cost_usd, result.usage  # priced: each call's cost computed
    assert not result.usage.unpriced, result.usage


async def loopstate_via_litellm(base: str, steps: int) -> None:
    await loopstate(base, steps, direct=False)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    variants: dict[str, Variant] = {
        "raw httpx": raw_httpx, "litellm alone": litellm_alone,
        "loopstate": loopstate, "loopstate direct=False": loopstate_via_litellm,
    }  # fmt: skip
    missing: list[str] = []
    with wire_server() as base:
        figures = asyncio.run(medians(base, variants, repeats, missing, peers=False))
    print(f"{MODEL}: ", end="")
    report(figures, missing)


if __name__ == "__main__":
    main()
