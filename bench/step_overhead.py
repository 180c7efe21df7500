"""Step overhead of the agent loop, as ratios against floors measured in the same run.

    python bench/step_overhead.py

Prints µs per step of a 200-step run (ScriptedModel, MemoryStore, one tool call per step) for
loopstate, for a minimal hand-written python-statemachine loop of the same shape, and for a
bare asyncio loop; flatness (200 vs 5 steps); 1,000 concurrent runs x 5 steps (steps/s, peak
RSS, each in a fresh process, in 5 pairs: the ratios are the pairs' medians), twice: back to
back (the instant model never yields, so each run goes to its end, or for loopstate to its
lease's release, before the next starts; the minimal loop then holds one run at a time while
loopstate keeps every result) and interleaved (the model yields once per call, as a real one
does, so all 1,000 runs are in flight together); and `import loopstate` time, its modules
compiled first as an installed package's are. structlog is configured as an application
would, filtering below WARNING.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import statistics
import subprocess
import sys
import time
from typing import Any

import structlog
from statemachine import State, StateChart

from loopstate import Agent, MemoryStore, ScriptedModel, tool
from loopstate.testing import call

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
REPEATS = 7
_SOURCES = ("loopstate", "engine", "machines", "tools")  # the package's directories


@tool
async def echo(x: int) -> str:
    """Echo a number."""
    return str(x)


@tool
def echo_sync(x: int) -> str:
    """Echo a number (a sync tool: it runs in a worker thread)."""
    return str(x)


def script(steps: int, name: str = "echo") -> list[Any]:
    return [call(name, {"x": i}) for i in range(steps - 1)] + ["done"]


async def loopstate_run(steps: int, t: Any = echo) -> float:
    agent = Agent(ScriptedModel(script(steps, t.name)), [t], max_steps=10**6, store=MemoryStore())
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert (result.status, result.steps) == ("done", steps), result
    return elapsed / steps * 1e6


class MinimalLoop(StateChart):  # type: ignore[type-arg]
    allow_event_without_transition = False
    catch_errors_as_events = False
    idle = State(initial=True)
    thinking = State()
    executing_tool = State()
    done = State(final=True)
    start = idle.to(thinking)
    replied = thinking.to(done, cond="is_answer") | thinking.to(executing_tool)
    tools_done = executing_tool.to(thinking)

    def is_answer(self, calls: int) -> bool:
        return calls == 0


class Yielding:
    """An instant model that yields to the event loop once per call, as any real model call
    does: runs gathered together then really are in flight together."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.name = inner.name

    async def complete(self, request: Any) -> Any:
        await asyncio.sleep(0)
        return await self.inner.complete(request)


async def minimal_run(steps: int, yielding: bool = False) -> float:
    model: Any = ScriptedModel(script(steps))
    model = Yielding(model) if yielding else model
    from loopstate import ModelRequest, ToolMessage, UserMessage

    started = time.perf_counter()
    machine = MinimalLoop()
    messages: list[Any] = [UserMessage(content="go")]
    machine.start()
    while not machine.is_terminated:
        request = ModelRequest.model_construct(messages=tuple(messages), step=len(messages))
        reply = (await model.complete(request)).message
        messages.append(reply)
        machine.replied(calls=len(reply.calls))
        if reply.calls:
            for c in reply.calls:
                result = await echo.fn(x=int(c.function.arguments.split(":")[1].strip(" }")))
                messages.append(ToolMessage(tool_call_id=c.id, content=result))
            machine.tools_done()
    return (time.perf_counter() - started) / steps * 1e6


async def bare_run(steps: int) -> float:
    model = ScriptedModel(script(steps))
    from loopstate import ModelRequest, ToolMessage, UserMessage

    started = time.perf_counter()
    messages: list[Any] = [UserMessage(content="go")]
    while True:
        request = ModelRequest.model_construct(messages=tuple(messages), step=len(messages))
        reply = (await model.complete(request)).message
        messages.append(reply)
        if not reply.calls:
            break
        for c in reply.calls:
            result = await echo.fn(x=1)
            messages.append(ToolMessage(tool_call_id=c.id, content=result))
    return (time.perf_counter() - started) / steps * 1e6


async def medians() -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    for _ in range(REPEATS):  # interleaved, so drifts in machine speed hit all alike
        for name, fn in (
            ("loopstate_200", lambda: loopstate_run(200)),
            ("loopstate_5", lambda: loopstate_run(5)),
            ("loopstate_sync_200", lambda: loopstate_run(200, echo_sync)),
            ("minimal_200", lambda: minimal_run(200)),
            ("bare_200", lambda: bare_run(200)),
        ):
            gc.collect()
            samples.setdefault(name, []).append(await fn())
    return {k: statistics.median(v) for k, v in samples.items()}


CONCURRENT = """
import asyncio, resource, sys, time
sys.path.insert(0, {bench!r})
import step_overhead as b
def model():
    scripted = b.ScriptedModel(b.script(5))
    return b.Yielding(scripted) if {yielding!r} else scripted
async def loopstate_run():  # the agent and its model are made when the run starts, as
    return await b.Agent(model(), [b.echo], store=b.MemoryStore()).run("go")  # minimal_run's
async def main():
    if {kind!r} == "loopstate":
        runs = [loopstate_run() for _ in range(1000)]
    else:
        runs = [b.minimal_run(5, {yielding!r}) for _ in range(1000)]
    t = time.perf_counter()
    await asyncio.gather(*runs)
    print(5000 / (time.perf_counter() - t), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
asyncio.run(main())
"""


def concurrent(kind: str, yielding: bool = False) -> tuple[float, float]:
    code = CONCURRENT.format(bench=sys.path[0], kind=kind, yielding=yielding)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    steps_s, rss_kb = out.stdout.split()
    return float(steps_s), float(rss_kb) / 1024


def import_time() -> tuple[float, bool]:
    def once(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - started

    # as installed: bytecode compiled (PYTHONDONTWRITEBYTECODE would make every import compile)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *_SOURCES], check=True)
    base = statistics.median(once("pass") for _ in range(5))
    ours = statistics.median(once("import loopstate") for _ in range(5))
    leaked = subprocess.run(
        [sys.executable, "-c", "import sys, loopstate; print('litellm' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip() == "True"  # fmt: skip
    return ours - base, leaked


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def concurrency_rows(yielding: bool, pairs: int = 5) -> list[tuple[str, str, str]]:
    """Runs in pairs, loopstate then the minimal loop, each in a fresh process: the ratios
    are the medians of the pairs' (one pair sees one machine speed), the figures medians."""
    how = "interleaved" if yielding else "back to back"
    ours, floor = [], []
    for _ in range(pairs):
        ours.append(concurrent("loopstate", yielding))
        floor.append(concurrent("minimal", yielding))
    speed = statistics.median(a[0] / b[0] for a, b in zip(ours, floor, strict=True))
    memory = statistics.median(a[1] / b[1] for a, b in zip(ours, floor, strict=True))
    steps_s, rss = (statistics.median(r[i] for r in ours) for i in (0, 1))
    floor_steps_s, floor_rss = (statistics.median(r[i] for r in floor) for i in (0, 1))
    return [
        (f"1,000 runs x 5 steps, {how}: loopstate",
         f"{steps_s:,.0f} steps/s, {rss:.0f} MB peak RSS", "peers 160-310 steps/s, 148-186 MB"),
        (f"1,000 runs x 5 steps, {how}: minimal loop",
         f"{floor_steps_s:,.0f} steps/s, {floor_rss:.0f} MB", ""),
        (f"1,000 runs x 5 steps, {how}: speed", f"{speed:.2f}x the minimal loop's",
         f"target >= 0.75x {mark(speed >= 0.75)}"),
        (f"1,000 runs x 5 steps, {how}: memory", f"{memory:.2f}x the minimal loop's",
         f"target <= 1.5x {mark(memory <= 1.5)}"),
    ]  # fmt: skip


def main() -> None:
    m = asyncio.run(medians())
    ratio = m["loopstate_200"] / m["minimal_200"]
    flat = m["loopstate_200"] / m["loopstate_5"]
    imported, leaked = import_time()
    rows = [
        ("loopstate, 200 steps (async tool)", f"{m['loopstate_200']:.0f} µs/step", ""),
        ("loopstate, 200 steps (sync tool, thread)", f"{m['loopstate_sync_200']:.0f} µs/step", ""),
        ("minimal statechart loop (floor)", f"{m['minimal_200']:.0f} µs/step", ""),
        ("bare asyncio loop (floor)", f"{m['bare_200']:.0f} µs/step", ""),
        ("loopstate / minimal statechart", f"{ratio:.2f}x", f"target <= 1.5x {mark(ratio <= 1.5)}"),
        ("loopstate / bare asyncio", f"{m['loopstate_200'] / m['bare_200']:.1f}x", ""),
        ("flatness: 200-step / 5-step µs/step", f"{flat:.2f}x",
         f"target <= 1.2x {mark(flat <= 1.2)}"),
        *concurrency_rows(yielding=False),
        *concurrency_rows(yielding=True),
        ("import loopstate", f"{imported * 1000:.0f} ms (litellm imported: {leaked})",
         f"target < 300 ms {mark(imported < 0.3 and not leaked)}"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    print(f"step overhead (median of {REPEATS}; structlog filtering below WARNING)")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:<34} {note}")


if __name__ == "__main__":
    main()
