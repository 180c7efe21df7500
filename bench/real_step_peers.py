"""The peers of `bench/real_step.py`, each with its own real OpenAI client, run in their own
virtualenv (they need openai>=3, litellm needs openai<3; they are not loopstate dependencies):

    python -m venv .venv-peers
    .venv-peers/bin/pip install "pydantic-ai-slim[openai]" openai-agents
    .venv-peers/bin/python bench/real_step_peers.py BASE H1 H2 ...   # what real_step.py runs

For each history H it does one run of H model calls against `BASE/h{H}/v1` (the same wire
server and workload as real_step.py) after a warm-up, and prints one JSON object:
`{"peer": {"H": [ms CPU per call, ms wall per call]}}`; a peer that is not installed is
`"not installed"`. CPU is this process's own (`time.process_time`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

MODEL = "bench-model"
Variant = Callable[[str, int], Awaitable[None]]


async def echo(x: int) -> str:
    """Echo a number."""
    return str(x)


def peers() -> dict[str, Variant | str]:
    found: dict[str, Variant | str] = {}
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
        from pydantic_ai.usage import UsageLimits
    except ImportError:
        found["pydantic-ai"] = "not installed"
    else:

        async def pydantic_ai(base: str, steps: int) -> None:
            model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base, api_key="k"))
            agent = Agent(model)
            agent.tool_plain(echo)
            result = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
            assert result.output == "Done.", result

        found["pydantic-ai"] = pydantic_ai
    try:
        import agents
        from openai import AsyncOpenAI
    except ImportError:
        found["openai-agents"] = "not installed"
    else:

        async def openai_agents(base: str, steps: int) -> None:
            client = AsyncOpenAI(base_url=base, api_key="k")
            model = agents.OpenAIChatCompletionsModel(MODEL, openai_client=client)
            agent = agents.Agent(name="bench", model=model, tools=[agents.function_tool(echo)])
            result = await agents.Runner.run(agent, "go", max_turns=10**6)
            assert result.final_output == "Done.", result

        found["openai-agents"] = openai_agents
    return found


async def main(base: str, histories: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, variant in peers().items():
        if isinstance(variant, str):
            out[name] = variant
            continue
        await variant(f"{base}/h2/v1", 2)  # warm up: imports, clients, caches
        figures = {}
        for steps in histories:
            gc.collect()
            cpu, wall = time.process_time(), time.perf_counter()
            await variant(f"{base}/h{steps}/v1", steps)
            figures[str(steps)] = [
                (time.process_time() - cpu) / steps * 1e3,
                (time.perf_counter() - wall) / steps * 1e3,
            ]
        out[name] = figures
    return out


if __name__ == "__main__":
    try:  # the SDK's tracing would try to export spans to OpenAI's servers
        from agents import set_tracing_disabled

        set_tracing_disabled(True)
    except ImportError:
        pass
    print(json.dumps(asyncio.run(main(sys.argv[1], [int(h) for h in sys.argv[2:]]))))
