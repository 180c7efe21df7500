"""A real step at wire speed: the model call over HTTP, as ratios to a raw POST in the same run.

    python bench/real_step.py [REPEATS]

An instant OpenAI-compatible server (`bench/wire_server.py`, in its own process, so its CPU is
not counted) answers a tool call per request until a run of H steps is complete. For each H in
5, 25, 100, 200, every variant does that same run (one tool call per step, the history growing
by two messages a step) and is measured in CPU (`time.process_time`, all of this process's
threads) and wall time per step:

- raw httpx: one `httpx.AsyncClient`, `json.dumps` of the same body, `POST`, `json.loads` (floor);
- `litellm.acompletion` alone, no engine;
- loopstate: `Agent` + `LiteLLMModel` + `MemoryStore`;
- pydantic-ai and the OpenAI Agents SDK with their own OpenAI client, if installed (optional
  peers, not dependencies of loopstate: "not installed" otherwise).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import structlog

from loopstate import Agent, LiteLLMModel, MemoryStore, tool
from loopstate.engine.models.litellm import _import_litellm

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
HISTORIES = (5, 25, 100, 200)
MODEL = "bench-model"


@tool
async def echo(x: int) -> str:
    """Echo a number."""
    return str(x)


TOOLS = [echo.definition.to_wire()]
Variant = Callable[[str, int], Awaitable[None]]


def _tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": c["id"], "content": "1"}
        for c in message.get("tool_calls") or ()
    ]


_clients: list[httpx.AsyncClient] = []  # one pool for every run, as litellm keeps its own


async def raw_httpx(base: str, steps: int) -> None:
    if not _clients:
        _clients.append(httpx.AsyncClient())
    client = _clients[0]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    headers = {"authorization": "Bearer k", "content-type": "application/json"}
    for _ in range(steps):
        body = {"model": MODEL, "messages": messages, "tools": TOOLS, "tool_choice": "auto"}
        response = await client.post(
            f"{base}/chat/completions", content=json.dumps(body), headers=headers
        )
        message = json.loads(response.content)["choices"][0]["message"]
        messages.append(message)
        messages.extend(_tool_results(message))
    assert messages[-1]["content"] == "Done.", messages[-1]


async def litellm_alone(base: str, steps: int) -> None:
    litellm = _import_litellm()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _ in range(steps):
        reply = await litellm.acompletion(
            model=f"openai/{MODEL}", api_base=base, api_key="k", messages=messages,
            tools=TOOLS, tool_choice="auto", num_retries=0, _skip_mcp_handler=True,
        )  # fmt: skip
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        messages.extend(_tool_results(message))
    assert messages[-1]["content"] == "Done.", messages[-1]


async def loopstate(base: str, steps: int) -> None:
    model = LiteLLMModel(f"openai/{MODEL}", api_base=base, api_key="k")
    agent = Agent(model, [echo], store=MemoryStore(), max_steps=10**6)
    result = await agent.run("go")
    assert (result.status, result.steps) == ("done", steps), result


def _peers() -> dict[str, Variant | str]:
    peers: dict[str, Variant | str] = {}
    try:
        from pydantic_ai import Agent as PydanticAgent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
        from pydantic_ai.usage import UsageLimits
    except ImportError:
        peers["pydantic-ai"] = "not installed"
    else:

        async def pydantic_ai(base: str, steps: int) -> None:
            model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base, api_key="k"))
            agent = PydanticAgent(model)
            agent.tool_plain(echo.fn)
            result = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
            assert result.output == "Done.", result

        peers["pydantic-ai"] = pydantic_ai
    try:
        import agents as openai_agents
        from openai import AsyncOpenAI
    except ImportError:
        peers["openai-agents"] = "not installed"
    else:

        async def openai_agents_sdk(base: str, steps: int) -> None:
            client = AsyncOpenAI(base_url=base, api_key="k")
            model = openai_agents.OpenAIChatCompletionsModel(MODEL, openai_client=client)
            agent = openai_agents.Agent(
                name="bench", model=model, tools=[openai_agents.function_tool(echo.fn)]
            )
            result = await openai_agents.Runner.run(agent, "go", max_turns=10**6)
            assert result.final_output == "Done.", result

        peers["openai-agents"] = openai_agents_sdk
    return peers


async def measure(variant: Variant, base: str, steps: int) -> tuple[float, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    await variant(f"{base}/h{steps}/v1", steps)
    return (time.process_time() - cpu) / steps * 1e3, (time.perf_counter() - wall) / steps * 1e3


async def medians(base: str, variants: dict[str, Variant], repeats: int) -> dict[Any, Any]:
    for variant in variants.values():  # warm up: imports, clients, caches
        await variant(f"{base}/h2/v1", 2)
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(repeats):  # interleaved, so drifts in machine speed hit all alike
        for steps in HISTORIES:
            for name, variant in variants.items():
                samples.setdefault((name, steps), []).append(await measure(variant, base, steps))
    return {
        key: (statistics.median(c for c, _ in got), statistics.median(w for _, w in got))
        for key, got in samples.items()
    }


def report(figures: dict[Any, Any], variants: dict[str, Variant], missing: list[str]) -> None:
    print("per model call, ms of CPU / wall (x the raw POST's CPU in the same run)")
    print(f"  {'':<16}" + "".join(f"{'history ' + str(h):>28}" for h in HISTORIES))
    for name in variants:
        cells = []
        for steps in HISTORIES:
            cpu, wall = figures[(name, steps)]
            ratio = cpu / figures[("raw httpx", steps)][0]
            cells.append(f"{cpu:6.2f} / {wall:6.2f} ({ratio:5.1f}x)")
        print(f"  {name:<16}" + "".join(f"{c:>28}" for c in cells))
    for name in missing:
        print(f"  {name:<16}not installed")
    worst = max(figures[("loopstate", h)][0] / figures[("raw httpx", h)][0] for h in HISTORIES)
    verdict = "PASS" if worst <= 2 else "MISS"
    print(f"loopstate + LiteLLMModel, worst CPU ratio to the raw POST: {worst:.2f}x "
          f"(target <= 2x) {verdict}")  # fmt: skip


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    server = Path(__file__).with_name("wire_server.py")
    with subprocess.Popen(
        [sys.executable, str(server)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        assert process.stdin is not None
        base = f"http://127.0.0.1:{process.stdout.readline().strip()}"
        variants: dict[str, Variant] = {
            "raw httpx": raw_httpx, "litellm alone": litellm_alone, "loopstate": loopstate
        }  # fmt: skip
        missing = []
        for name, peer in _peers().items():
            if isinstance(peer, str):
                missing.append(name)
            else:
                variants[name] = peer
        figures = asyncio.run(medians(base, variants, repeats))
        process.stdin.close()
    report(figures, variants, missing)


if __name__ == "__main__":
    main()
