"""What tracing costs a step, as ratios against a floor measured in the same run.

    python bench/otel_overhead.py [REPEATS]

CPU µs per step of a 200-step run (ScriptedModel, MemoryStore, one tool call per step) with no
hooks (the floor), then as ratios to it, each the median over REPEATS (default 7) of pairs run
back to back: telemetry off (`loopstate.telemetry` imported, no OTelHooks: what an
application pays that has the extra installed but not enabled), OTelHooks with a no-op tracer
provider (the API without an SDK: what a library user pays before configuring one), and, for
information, OTelHooks with the SDK recording every span to an exporter that drops them.
Also whether `import loopstate` imported opentelemetry (it must not). Targets: off ≤ 1.02,
no-op ≤ 1.10.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from loopstate import Agent, Hooks, MemoryStore, ScriptedModel, tool
from loopstate.testing import call

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
STEPS = 200


@tool
async def echo(x: int) -> str:
    """Echo a number."""
    return str(x)


def script() -> list[Any]:
    return [call("echo", {"x": i}) for i in range(STEPS - 1)] + ["done"]


async def per_step(hooks: Callable[[], Sequence[Hooks]]) -> float:
    agent = Agent(
        ScriptedModel(script()), [echo], max_steps=10**6, store=MemoryStore(), hooks=hooks()
    )
    gc.collect()
    started = time.process_time()  # this process's CPU: other load on the machine moves less
    result = await agent.run("go")
    elapsed = time.process_time() - started
    assert (result.status, result.steps) == ("done", STEPS), result
    return elapsed / STEPS * 1e6


def imports_opentelemetry() -> bool:
    code = "import sys, loopstate; print(any('opentelemetry' in m for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


async def main(repeats: int) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import NoOpTracerProvider

    from loopstate.telemetry import OTelHooks

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(Dropping()))
    kinds: dict[str, Callable[[], Sequence[Hooks]]] = {
        "off": lambda: (),
        "no-op provider": lambda: [OTelHooks(tracer_provider=NoOpTracerProvider())],
        "SDK, every span recorded": lambda: [OTelHooks(tracer_provider=sdk)],
    }
    for _ in range(3):  # warm up every path
        for make in kinds.values():
            await per_step(make)
    floors: list[float] = []
    ratios: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(repeats):
        for name, make in kinds.items():
            pair = [lambda: (), make] if i % 2 else [make, lambda: ()]  # alternate the order
            first, second = [await per_step(m) for m in pair]
            floor, measured = (first, second) if i % 2 else (second, first)
            floors.append(floor)
            ratios[name].append(measured / floor)
    floor = statistics.median(floors)
    print(f"floor (no hooks): {floor:.1f} µs/step ({STEPS} steps, median of {len(floors)})")
    targets = {"off": 1.02, "no-op provider": 1.10}
    for name, values in ratios.items():
        ratio = statistics.median(values)
        target = f"  (target ≤ {targets[name]:.2f})" if name in targets else ""
        print(f"{name:>26}: {ratio:.3f}× the floor, {ratio * floor:.1f} µs/step{target}")
    print(f"`import loopstate` imports opentelemetry: {imports_opentelemetry()}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
