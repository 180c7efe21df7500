"""A real step at wire speed: the model call over HTTP, as ratios to a raw POST in the same run.

    python bench/real_step.py [REPEATS]

An instant OpenAI-compatible server (`bench/wire_server.py`, in its own process, so its CPU is
not counted) answers a tool call per request until a run of H steps is complete. For each H in
5, 25, 100, 200, every variant does that same run (one tool call per step, the history growing
by two messages a step) and is measured in CPU (`time.process_time`, all of this process's
threads) and wall time per step, over at least 100 calls a sample (a run of 5 steps 20 times).
Ratios are the medians over REPEATS of each sample's ratio to the raw POST measured just before
it (this machine's speed drifts between repeats; pairs drift together):

- raw httpx: one `httpx.AsyncClient`, `json.dumps` of the same body, `POST`, `json.loads` (floor);
- `litellm.acompletion` alone, no engine;
- loopstate: `Agent` + `LiteLLMModel` + `MemoryStore`, and the same with `direct=False` (every
  call through `litellm.acompletion`: the fast path, `engine/models/provider_path.py`, off);
  the model is `openai/gpt-4o-mini`, which litellm prices: each call's cost is computed (checked);
- loopstate against Groq-, DeepSeek- (reasoning) and Gemini-compatible-shaped replies
  (`SHAPED`), each ratio still to the same raw POST of the plain OpenAI shape;
- pydantic-ai and the OpenAI Agents SDK with their own OpenAI client, in their own virtualenv
  `.venv-peers` and process (`bench/real_step_peers.py` says how to make it; they need openai>=3,
  litellm openai<3): "not installed" without it.
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
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import structlog

from loopstate import Agent, LiteLLMModel, MemoryStore, tool
from loopstate.engine.models.litellm import _import_litellm

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
HISTORIES = (5, 25, 100, 200)
CALLS = 100  # calls per sample at least: a run of 5 steps is measured over 20 runs
MODEL = "gpt-4o-mini"  # priced in litellm's local map: every call's cost is computed


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


async def loopstate(
    base: str, steps: int, *, direct: bool = True, name: str = f"openai/{MODEL}"
) -> None:
    model = LiteLLMModel(name, api_base=base, api_key="k", direct=direct)
    agent = Agent(model, [echo], store=MemoryStore(), max_steps=10**6)
    result = await agent.run("go")
    assert (result.status, result.steps) == ("done", steps), result
    if not name.startswith("openai/gemini"):  # litellm prices none of openai/gemini-*
        assert result.usage.cost_usd, result.usage  # priced: each call's cost computed
        assert not result.usage.unpriced, result.usage


def shaped(shape: str, name: str, *, direct: bool = True) -> Variant:
    """`loopstate` against the server's replies in `shape`'s form (`wire_server.py`)."""

    async def variant(base: str, steps: int) -> None:
        await loopstate(base.replace("/h", f"/{shape}/h", 1), steps, direct=direct, name=name)

    return variant


# Other providers' shapes: Groq and DeepSeek (litellm's base HTTP handler: `provider_path`),
# Gemini's OpenAI-compatible endpoint (an `openai/` model with its `api_base`).
SHAPED = {
    "groq/": shaped("groq", "groq/openai/gpt-oss-20b"),
    "groq/ direct=False": shaped("groq", "groq/openai/gpt-oss-20b", direct=False),
    "deepseek/ reasoning": shaped("deepseek", "deepseek/deepseek-reasoner"),
    "deepseek/ direct=False": shaped("deepseek", "deepseek/deepseek-reasoner", direct=False),
    "gemini-compatible": shaped("gemini", "openai/gemini-2.5-flash"),
}


async def loopstate_via_litellm(base: str, steps: int) -> None:
    """Every call through `litellm.acompletion` (`direct=False`): the path before the thin one."""
    await loopstate(base, steps, direct=False)


PEERS = Path(__file__).with_name("real_step_peers.py")
PEERS_PYTHON = Path(__file__).parents[1] / ".venv-peers" / "bin" / "python"


def peer_figures(base: str) -> dict[str, Any]:
    """One measurement of each peer per history, in the peers' own virtualenv and process."""
    if not PEERS_PYTHON.exists():
        return {"peers": f"not installed ({PEERS_PYTHON}: see {PEERS.name})"}
    out = subprocess.run(
        [str(PEERS_PYTHON), str(PEERS), base, *map(str, HISTORIES)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures: dict[str, Any] = json.loads(out.stdout)
    return figures


async def measure(variant: Variant, base: str, steps: int) -> tuple[float, float]:
    """Per model call: ms of CPU, the variant's own and that of the background work it left
    (litellm logs and prices each call in tasks and in its logging worker, after it returned:
    counted to it, not to the next variant), and ms of wall until it returned."""
    gc.collect()
    before = asyncio.all_tasks()
    runs = max(1, CALLS // steps)  # short runs repeated: a sample of at least CALLS calls
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(runs):
        await variant(f"{base}/h{steps}/v1", steps)
    wall = time.perf_counter() - wall
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    if left:
        await asyncio.wait(left, timeout=1.0)
    await _logged()
    return (time.process_time() - cpu) / (runs * steps) * 1e3, wall / (runs * steps) * 1e3


async def _logged() -> None:
    """Wait for litellm's logging worker to finish what the calls queued: its tasks outlive
    the variant (a persistent worker), and would otherwise be charged to the next one."""
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout=5.0)


async def medians(
    base: str, variants: dict[str, Variant], repeats: int, missing: list[str], *, peers: bool = True
) -> dict[Any, Any]:
    for variant in variants.values():  # warm up: imports, clients, caches
        await variant(f"{base}/h2/v1", 2)
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for repeat in range(repeats):  # interleaved, so drifts in machine speed hit all alike
        for steps in HISTORIES:
            for name, variant in variants.items():
                samples.setdefault((name, steps), []).append(await measure(variant, base, steps))
        others = await asyncio.to_thread(peer_figures, base) if peers else {}
        for name, got in others.items():
            if isinstance(got, str):
                if repeat == 0:
                    missing.append(f"{name:<16}{got}")
                continue
            for steps in HISTORIES:
                cpu, wall = got[str(steps)]
                samples.setdefault((name, steps), []).append((cpu, wall))
    return {key: _summary(got, samples[("raw httpx", key[1])]) for key, got in samples.items()}


def _summary(
    got: list[tuple[float, float]], floor: list[tuple[float, float]]
) -> tuple[float, float, float, float]:
    """Median CPU and wall per call, and the medians of their ratios to the raw POST measured
    just before in the same repeat (paired: this machine's speed drifts between repeats)."""
    pairs = list(zip(got, floor, strict=True))
    return (
        statistics.median(c for c, _ in got),
        statistics.median(w for _, w in got),
        statistics.median(c / fc for (c, _), (fc, _) in pairs),
        statistics.median(w / fw for (_, w), (_, fw) in pairs),
    )


def report(figures: dict[Any, Any], missing: list[str]) -> None:
    print("per model call, ms of CPU / wall (x the raw POST's CPU / wall in the same repeat)")
    print(f"  {'':<24}" + "".join(f"{'history ' + str(h):>30}" for h in HISTORIES))
    for name in dict.fromkeys(name for name, _ in figures):
        cells = []
        for steps in HISTORIES:
            cpu, wall, x_cpu, x_wall = figures[(name, steps)]
            cells.append(f"{cpu:5.2f}/{wall:6.2f} ({x_cpu:4.1f}x/{x_wall:4.1f}x)")
        print(f"  {name:<24}" + "".join(f"{c:>30}" for c in cells))
    for line in missing:
        print(f"  {line}")
    for fast in ("loopstate", *(name for name in SHAPED if "direct=False" not in name)):
        if (fast, HISTORIES[0]) not in figures:
            continue  # not measured (bench/anthropic_step.py measures loopstate alone)
        worst = max(figures[(fast, h)][2] for h in HISTORIES)
        verdict = "PASS" if worst <= 1.6 else "MISS"
        print(f"{fast} (fast path), worst CPU ratio to the raw POST: {worst:.2f}x "
              f"(target <= 1.6x) {verdict}")  # fmt: skip
    peers = {name for name, _ in figures} - {"raw httpx", "litellm alone", *SHAPED}
    peers = {name for name in peers if not name.startswith("loopstate")}
    for peer in sorted(peers):
        ahead = all(figures[("loopstate", h)][0] < figures[(peer, h)][0] for h in HISTORIES)
        print(f"loopstate ahead of {peer} in CPU at every history: {'yes' if ahead else 'NO'}")


@contextmanager
def wire_server() -> Iterator[str]:
    """`bench/wire_server.py` in its own process: its base URL while the block runs."""
    server = Path(__file__).with_name("wire_server.py")
    with subprocess.Popen(
        [sys.executable, str(server)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        assert process.stdin is not None
        yield f"http://127.0.0.1:{process.stdout.readline().strip()}"
        process.stdin.close()


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    variants: dict[str, Variant] = {
        "raw httpx": raw_httpx, "litellm alone": litellm_alone,
        "loopstate": loopstate, "loopstate direct=False": loopstate_via_litellm, **SHAPED,
    }  # fmt: skip
    missing: list[str] = []
    with wire_server() as base:
        figures = asyncio.run(medians(base, variants, repeats, missing))
    report(figures, missing)


if __name__ == "__main__":
    main()
