"""The price of durability, as ratios against MemoryStore measured in the same run.

    python bench/durability.py

Prints µs per step with SQLiteStore (default and power-loss durability) vs MemoryStore;
bytes stored for a 40-step run with 1 KB tool results vs the raw bytes of its messages;
resume latency of a suspended run up to its next model call; and process memory with 10,000
suspended runs in the store vs 100.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from loopstate import Agent, Approve, MemoryStore, ModelRequest, ModelResponse, ScriptedModel, tool
from loopstate.engine.messages import to_wire
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.testing import call

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
KB = "x" * 1024


@tool
async def fetch(i: int) -> str:
    """Returns 1 KB."""
    return KB


@tool(needs_approval=True)
async def publish(i: int) -> str:
    """Needs approval."""
    return "published"


def script(steps: int) -> list[Any]:
    return [call("fetch", {"i": i}) for i in range(steps - 1)] + ["done"]


async def per_step(store: Any, steps: int = 100) -> float:
    agent = Agent(ScriptedModel(script(steps)), [fetch], max_steps=10**6, store=store)
    started = time.perf_counter()
    result = await agent.run("go")
    assert result.status == "done", result
    return (time.perf_counter() - started) / steps * 1e6


async def step_costs(root: Path) -> dict[str, float]:
    samples: dict[str, list[float]] = {"memory": [], "sqlite": [], "sqlite_power": []}
    for i in range(5):
        samples["memory"].append(await per_step(MemoryStore()))
        samples["sqlite"].append(await per_step(SQLiteStore(root / f"p{i}.db")))
        power = SQLiteStore(root / f"f{i}.db", durability="power")
        samples["sqlite_power"].append(await per_step(power))
    return {k: statistics.median(v) for k, v in samples.items()}


async def storage(root: Path) -> tuple[int, int, int, int]:
    """Raw message bytes of a 40-step run; its stored payloads; the file after it; and how
    much the file grows for a second such run (the fixed cost of empty tables left out)."""
    path = root / "size.db"
    sizes = []
    for run_id in ("first", "second"):
        store = SQLiteStore(path)
        agent = Agent(ScriptedModel(script(40)), [fetch], store=store, max_steps=40,
                      ids=lambda r=run_id: r)  # fmt: skip
        result = await agent.run("go")
        store.close()
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        sizes.append(path.stat().st_size)
    raw = sum(len(str(to_wire(m)).encode()) for m in result.messages)
    db = sqlite3.connect(path)
    only = "WHERE run_id = 'first'"
    payload = (
        sum(
            db.execute(
                f"SELECT coalesce(sum(length(CAST(body AS BLOB))), 0) FROM {t} {only}"
            ).fetchone()[0]
            for t in ("messages", "transitions", "calls")
        )
        + db.execute(f"SELECT sum(length(header)) FROM runs {only}").fetchone()[0]
    )
    db.close()
    return raw, payload, sizes[0], sizes[1] - sizes[0]


class Timed(ScriptedModel):
    """Records when the model is first asked for something."""

    asked_at: float | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.asked_at is None:
            self.asked_at = time.perf_counter()
        return await super().complete(request)


async def resume_latency(root: Path, n: int = 50) -> float:
    store = SQLiteStore(root / "resume.db")
    turns: list[Any] = [call("fetch", {"i": i}) for i in range(5)] + [call("publish", {"i": 0})]
    latencies = []
    for i in range(n):
        first = Agent(ScriptedModel([*turns, "done"]), [fetch, publish], store=store,
                      ids=lambda i=i: f"r{i}")  # fmt: skip
        suspended = await first.run("go")
        model = Timed([*turns, "done"], by_step=True)
        later = Agent(model, [fetch, publish], store=store)
        started = time.perf_counter()
        await later.resume(suspended.run_id, {suspended.pending[0].call_id: Approve()})
        assert model.asked_at is not None
        latencies.append(model.asked_at - started)
    return statistics.median(latencies) * 1000


MEMORY = """
import asyncio, resource, sys
sys.path.insert(0, {bench!r})
import durability as b
from loopstate import Agent, Approve, ScriptedModel
async def main():
    store = b.SQLiteStore({db!r})
    runs = await store.list_runs(status="awaiting_approval", limit=100)
    model = ScriptedModel([b.call("publish", {{"i": 0}}), "done"], by_step=True)
    agent = Agent(model, [b.fetch, b.publish], store=store)
    await agent.resume(runs[0].run_id, {{"call_1_1": Approve()}})
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
asyncio.run(main())
"""


async def seed_suspended(path: Path, count: int) -> None:
    """One real suspended run, copied row for row under `count - 1` other ids."""
    store = SQLiteStore(path)
    agent = Agent(ScriptedModel([call("publish", {"i": 0}), "done"]), [fetch, publish],
                  store=store, ids=lambda: "seed")  # fmt: skip
    await agent.run("go")
    store.close()
    db = sqlite3.connect(path)
    for table in ("runs", "messages", "transitions", "calls"):
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})") if r[1] != "run_id"]
        names = ", ".join(cols)
        db.executemany(
            f"INSERT INTO {table} (run_id, {names}) SELECT ?, {names} FROM {table} "
            "WHERE run_id = 'seed'",
            ((f"seed-{n}",) for n in range(1, count)),
        )
    db.commit()
    db.close()


def rss_with(path: Path) -> float:
    code = MEMORY.format(bench=sys.path[0], db=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip()) / 1024


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        costs = asyncio.run(step_costs(root))
        raw, payload, file_size, growth = asyncio.run(storage(root))
        resume_ms = asyncio.run(resume_latency(root))
        asyncio.run(seed_suspended(root / "few.db", 100))
        asyncio.run(seed_suspended(root / "many.db", 10_000))
        few, many = rss_with(root / "few.db"), rss_with(root / "many.db")
    added_ms = (costs["sqlite"] - costs["memory"]) / 1000
    rows = [
        ("MemoryStore", f"{costs['memory']:.0f} µs/step", "floor"),
        ("SQLiteStore (process-kill safe, default)", f"{costs['sqlite']:.0f} µs/step",
         f"{costs['sqlite'] / costs['memory']:.2f}x memory"),
        ("  added by the store, per step (2 commits)", f"{added_ms * 1000:.0f} µs/step",
         f"target <= 1 ms  {mark(added_ms <= 1)}  (Burr's SQLite persister: ~2.2 ms)"),
        ("SQLiteStore (power-loss safe)", f"{costs['sqlite_power']:.0f} µs/step",
         f"{costs['sqlite_power'] / costs['memory']:.2f}x memory (an fsync per commit)"),
        ("40 steps x 1 KB results: raw messages", f"{raw:,} bytes", ""),
        ("  stored row payloads", f"{payload:,} bytes",
         f"{payload / raw:.2f}x raw; target <= 2x  {mark(payload / raw <= 2)}"),
        ("  whole SQLite file", f"{file_size:,} bytes",
         f"{file_size / raw:.2f}x raw (pages, with a page or two per empty table and index)"),
        ("  file growth for a second such run", f"{growth:,} bytes",
         f"{growth / raw:.2f}x raw; target <= 2x  {mark(growth / raw <= 2)}"),
        ("resume to next model call, p50", f"{resume_ms:.2f} ms",
         f"target <= 5 ms  {mark(resume_ms <= 5)}"),
        ("RSS, 100 suspended runs in the store", f"{few:.1f} MB", ""),
        ("RSS, 10,000 suspended runs in the store", f"{many:.1f} MB",
         f"{many / few:.2f}x; target: no growth  {mark(many / few <= 1.1)}"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    print("durability (medians; structlog filtering below WARNING)")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:<18} {note}")


if __name__ == "__main__":
    main()
