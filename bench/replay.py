"""Replay speed, beside the in-memory scripted run of the same shape measured in the same run.

    python bench/replay.py

Targets: a 200-step cassette replays in under 0.3 s; 100 cassettes of 20 steps in under 2 s.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from loopstate import Agent, MemoryStore, ScriptedModel, tool
from loopstate.engine.recording.recorder import Recorder
from loopstate.replay import replay
from loopstate.testing import call

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


@tool
async def lookup(i: int) -> str:
    """Look something up."""
    return f"result {i}: " + "x" * 200


def agent(steps: int) -> Agent:
    script: list[Any] = [call("lookup", {"i": i}) for i in range(steps - 1)] + ["done"]
    return Agent(ScriptedModel(script), [lookup], max_steps=10**6, store=MemoryStore())


async def scripted(steps: int, runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        await agent(steps).run("go")
    return time.perf_counter() - started


async def replayed(tapes: list[Path]) -> float:
    started = time.perf_counter()
    for tape in tapes:
        result = await replay(tape)
        assert result.status == "done"
    return time.perf_counter() - started


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        big = root / "big.jsonl"
        await agent(200).clone(hooks=[Recorder(big)]).run("go")
        small = []
        for i in range(100):
            small.append(root / f"small{i}.jsonl")
            await agent(20).clone(hooks=[Recorder(small[-1])]).run("go")
        rows = {"big": [], "big_floor": [], "small": [], "small_floor": []}
        for _ in range(3):
            rows["big"].append(await replayed([big]))
            rows["big_floor"].append(await scripted(200, 1))
            rows["small"].append(await replayed(small))
            rows["small_floor"].append(await scripted(20, 100))
        m = {k: statistics.median(v) for k, v in rows.items()}
        size = big.stat().st_size

    def mark(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    print("replay (median of 3; structlog filtering below WARNING)")
    print(f"  200-step cassette ({size:,} bytes): {m['big']:.3f} s"
          f"  vs scripted in-memory run {m['big_floor']:.3f} s ({m['big'] / m['big_floor']:.2f}x)"
          f"  target < 0.3 s {mark(m['big'] < 0.3)}")  # fmt: skip
    print(f"  100 cassettes x 20 steps: {m['small']:.3f} s"
          f"  vs scripted {m['small_floor']:.3f} s ({m['small'] / m['small_floor']:.2f}x)"
          f"  target < 2 s {mark(m['small'] < 2)}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
