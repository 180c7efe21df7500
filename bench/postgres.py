"""Workers on PostgreSQL beside SQLite, as ratios against SQLite measured in the same run.

    python bench/postgres.py [RUNS]

RUNS (default 200) runs are suspended on a gated call; once `loopstate worker` processes are
serving, this process queues a decision for each, and the workers resume them: 6 model calls
and 6 tools each (steps = model calls, the project's unit). Prints steps/s with 1, 2 and 4
worker processes on a throwaway PostgreSQL server (fsync on, `synchronous_commit=off`: like
SQLite's default, a commit survives the writer's crash, not a power cut) beside 1 worker on
SQLite, and the p50 latency from a decision queued to the run's first step after it.
Workers time their steps themselves (the stored transitions' times): start-up is excluded.
Workers wait for work on LISTEN/NOTIFY (their poll is a fallback).

CPU per step: the worker processes' (from /proc, from when they serve to the last run's end),
and for PostgreSQL the server's CPU time per step (the postmaster and its backends, from
/proc, over the whole measurement: it includes this process queueing the decisions), and the
round trips per step of one worker process whose connections go through a counting proxy
(tests/pg_wire.py: Sync and Query messages on the wire; a separate pass, as the proxy costs
time). Then the round trips and the time per decision, from this process through the proxy:
in one step (`record_decision`: one statement guarded by what the checker said at the run's
last save) beside the checked path (`queue_decision`: lease + read, save, release, and the
read that routes a sub-agent's call). On a 2-core machine the workers, the server and this
process share the cores: the figures say what the store costs, not how far it scales on a
server of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loopstate import Agent, MemoryStore, ScriptedModel, Store, tool
from loopstate.testing import call

HERE = Path(__file__).parent
TOOL_TURNS = 5


@tool(needs_approval=True)
def publish(item: int) -> str:
    """Publish an item: needs a decision."""
    return f"published {item}"


@tool
def lookup(key: int) -> str:
    """Look a key up."""
    return f"value of {key}"


def agent() -> Agent:
    """What the workers serve (`--agent postgres:agent`): gated, then 5 tool turns, then done."""
    script: list[Any] = [call("publish", {"item": 1})]
    script += [call("lookup", {"key": i}) for i in range(TOOL_TURNS)] + ["done"]
    return Agent(ScriptedModel(script, by_step=True), [publish, lookup], store=MemoryStore())


def start_worker(db: str, log: Path) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "loopstate", "worker", "--agent", "postgres:agent",
             "--db", db, "--poll", "0.02", "--concurrency", "4"],
            env={**os.environ, "PYTHONPATH": path}, stderr=out, stdout=subprocess.DEVNULL,
        )  # fmt: skip


def cpu_s(pid: int, *, children: bool = False) -> float:
    """CPU seconds process `pid` used (user + system; `children`: with its reaped children's)."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return sum(int(f) for f in fields[11 : 15 if children else 13]) / os.sysconf("SC_CLK_TCK")
    return 0.0


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds of the PostgreSQL server so far: the postmaster, its exited children (reaped
    into its own counters) and its live ones (background processes, backends)."""
    live = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _parent(entry) == postmaster
    ]
    return cpu_s(postmaster, children=True) + sum(cpu_s(pid) for pid in live)


def _parent(proc: Path) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((proc / "stat").read_text().rpartition(")")[2].split()[1])
    return 0


async def measure(
    db: str, store: Store, workers: int, runs: int, tmp: Path, *, postmaster: int = 0,
    worker_db: str | None = None,
) -> dict[str, float]:  # fmt: skip
    from loopstate import Approve
    from loopstate.engine.operations import record_decision

    suspended = agent().clone(store=store)
    pending = {}
    for i in range(runs):
        result = await suspended.run("go", run_id=f"w{workers}-{i}")
        pending[result.run_id] = result.pending[0].call_id
    logs = [tmp / f"w{workers}-{n}.log" for n in range(workers)]
    procs = [start_worker(worker_db or db, log) for log in logs]
    try:
        # Polling other processes' progress: there is no event of theirs to wait on.
        while not all("serving" in log.read_text() for log in logs):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        cpu = server_cpu_s(postmaster) if postmaster else 0.0
        client = sum(cpu_s(proc.pid) for proc in procs)
        decided = {}
        for run_id, call_id in pending.items():
            await record_decision(store, run_id, call_id, Approve(), actor="bench")
            decided[run_id] = time.time()
        # Seldom: each look is a query the server's CPU figure counts (the steps' own times
        # are the stored transitions', so how soon this notices the end changes nothing).
        while len(await store.list_runs(status="done", limit=runs)) < runs:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        cpu = (server_cpu_s(postmaster) - cpu) if postmaster else 0.0
        client = sum(cpu_s(proc.pid) for proc in procs) - client
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
    states = [await store.load(run_id) for run_id in pending]
    before = 2  # transitions up to the suspension: idle → thinking → awaiting_approval
    starts = [s.transitions[before].at for s in states]
    ends = [s.transitions[-1].at for s in states]
    steps = sum(s.steps - 1 for s in states)
    latency = [s.transitions[before].at - decided[s.run_id] for s in states]
    return {
        "steps_per_s": steps / (max(ends) - min(starts)),
        "p50_ms": statistics.median(latency) * 1000,
        "steps": steps,
        "cpu_ms_per_step": cpu / steps * 1000,
        "workers_cpu_ms_per_step": client / steps * 1000,
    }


async def main(runs: int) -> None:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from pg_wire import counting_proxy
    from postgres_server import fresh_schema, postgres_server

    from loopstate import PostgresStore
    from loopstate.engine.stores.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        path = tmp / "runs.db"
        sqlite = SQLiteStore(path)
        base = await measure(str(path), sqlite, 1, runs, tmp)
        sqlite.close()
        print(f"{runs} runs, 6 steps each after a decision; SQLite, 1 worker process:")
        print(
            f"  {base['steps_per_s']:7.0f} steps/s   p50 decision → resume {base['p50_ms']:.1f} ms"
            f"   worker CPU {base['workers_cpu_ms_per_step']:.2f} ms/step"
        )
        with postgres_server(settings="-c synchronous_commit=off") as dsn:
            postmaster = _postmaster(dsn)
            print("PostgreSQL (ratio to SQLite, 1 process):")
            for workers in (1, 2, 4):
                own = fresh_schema(dsn)  # each configuration in tables of its own
                store = PostgresStore(own)
                got = await measure(own, store, workers, runs, tmp, postmaster=postmaster)
                await store.close()
                print(
                    f"  {workers} worker processes: {got['steps_per_s']:7.0f} steps/s "
                    f"({got['steps_per_s'] / base['steps_per_s']:.2f}×)   p50 decision → resume "
                    f"{got['p50_ms']:.1f} ms ({got['p50_ms'] / base['p50_ms']:.2f}×)   CPU/step: "
                    f"server {got['cpu_ms_per_step']:.2f} ms, workers "
                    f"{got['workers_cpu_ms_per_step']:.2f} ms"
                )
            own = fresh_schema(dsn)
            with counting_proxy(own) as (proxied, wire):
                store = PostgresStore(own)  # this process's own statements are not counted
                got = await measure(own, store, 1, runs, tmp, worker_db=proxied)
                await store.close()
            print(
                f"  1 worker process through a counting proxy: "
                f"{wire.round_trips / got['steps']:.2f} round trips/step "
                f"({wire.round_trips} for {got['steps']:.0f} steps, start-up included)"
            )
            print("A person's decision, from this process through the counting proxy:")
            found = await decision_trips(fresh_schema(dsn), min(runs, 100))
            checked = found["checked path (queue_decision)"]
            for name, (trips, ms) in found.items():
                print(
                    f"  {name}: {trips:.2f} round trips, {ms:.2f} ms per decision "
                    f"({trips / checked[0]:.2f}× / {ms / checked[1]:.2f}× the checked path)"
                )


async def decision_trips(dsn: str, runs: int) -> dict[str, tuple[float, float]]:
    """Round trips and ms per decision, counted on the wire, by how it is recorded."""
    from pg_wire import counting_proxy

    from loopstate import Approve, PostgresStore
    from loopstate.engine.operations import queue_decision, record_decision

    ways = {
        "one step (record_decision)": record_decision,
        "checked path (queue_decision)": queue_decision,
    }
    found: dict[str, tuple[float, float]] = {}
    with counting_proxy(dsn) as (proxied, wire):
        store = PostgresStore(proxied)
        suspended = agent().clone(store=store)
        for name, way in ways.items():
            pending = []
            for i in range(runs + 1):
                result = await suspended.run("go", run_id=f"{name[:3]}-{i}")
                pending.append((result.run_id, result.pending[0].call_id))
            first = pending.pop(0)  # the first use of a statement prepares it: not counted
            await way(store, *first, Approve(), actor="bench")
            trips, started = wire.round_trips, time.perf_counter()
            for run_id, call_id in pending:
                await way(store, run_id, call_id, Approve(), actor="bench")
            spent = time.perf_counter() - started
            found[name] = ((wire.round_trips - trips) / runs, spent / runs * 1000)
        await store.close()
    return found


def _postmaster(dsn: str) -> int:
    """The pid of the server's postmaster: the parent of a backend."""
    import psycopg

    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return _parent(Path(f"/proc/{row[0]}"))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
