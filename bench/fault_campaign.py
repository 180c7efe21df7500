"""Fault campaign: runs with a non-idempotent tool, SIGKILLed at random moments, resumed to the end.

    .venv/bin/python bench/fault_campaign.py [RUNS] [--seed N] [--signal KILL|INT|TERM]

Each run is driven by child processes on one SQLite file: a gated `charge` (not idempotent,
its decision queued from this process as the CLI does), then an idempotent `put`, then an
answer. Every child is killed with SIGKILL after a random delay unless it finishes first, and
the run is resumed by a fresh child until it ends. Printed: runs, kills, duplicated executions
of `charge` (must be 0), lost decisions (0), unrecoverable runs (0). `--signal INT` or `TERM`
interrupts the children instead (Ctrl-C, a shutdown): an interrupted run must resume as a
killed one does, never end `aborted`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_ATTEMPTS = 12


def child(db: str, log: str, run_id: str, mode: str) -> None:
    """One process's share of a run: start it, or resume it."""
    from loopstate import Agent, ScriptedModel, tool
    from loopstate.engine.stores.sqlite import SQLiteStore
    from loopstate.testing import call

    def note(line: str) -> None:
        with open(log, "a") as f:
            f.write(f"{run_id} {line}\n")

    @tool(needs_approval=True)
    async def charge(amount: int) -> str:
        """Charge a card: not idempotent."""
        note("charge")
        await asyncio.sleep(0.02)
        return f"charged {amount}"

    @tool(idempotent=True)
    def put(key: str) -> str:
        """Store a key: idempotent."""
        note("put")
        time.sleep(0.02)
        return f"stored {key}"

    script = [call("charge", {"amount": 5}), call("put", {"key": "k"}), "done"]
    agent = Agent(
        ScriptedModel(script, by_step=True),
        [charge, put],
        store=SQLiteStore(db),
        lease_s=0.5,
        ids=lambda: run_id,
    )
    from loopstate.engine.sync import run_interruptible

    work = agent.run("charge and store") if mode == "run" else agent.resume(run_id)
    print("driving", flush=True)  # an interrupting campaign aims past the start-up
    try:
        run_interruptible(work)
    except KeyboardInterrupt:
        sys.exit(130)


def _started(
    rng: random.Random, how: signal.Signals, *child: str
) -> tuple[subprocess.Popen[str], float]:
    """A child process, and when to stop it. Half the processes are killed at a random moment
    of their life (a process takes ~0.3-1 s here, most of it starting Python); the others may
    finish. An interruption is aimed at the run itself: after the child says it drives it."""
    argv = [sys.executable, __file__, "--child", *child]
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    deadline = rng.uniform(0.05, 1.2) if rng.random() < 0.5 else 60.0
    if how != signal.SIGKILL and deadline < 60 and proc.stdout is not None:
        proc.stdout.readline()
        deadline = rng.uniform(0.0, 0.1)
    return proc, deadline


def _stopped(proc: subprocess.Popen[str], deadline: float, how: signal.Signals) -> bool:
    """Wait for the child until `deadline`, then send it `how`; whether it was stopped."""
    stopped = False
    try:
        proc.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, how)
        proc.wait()
        stopped = True
    if proc.stdout is not None:
        proc.stdout.close()
    return stopped


def campaign(runs: int, seed: int, how: signal.Signals = signal.SIGKILL) -> dict[str, int]:
    from loopstate.engine.errors import LoopstateError
    from loopstate.engine.operations import queue_decision
    from loopstate.engine.stores.sqlite import SQLiteStore

    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="loopstate-faults-"))
    db, log = str(work / "runs.db"), str(work / "effects.log")
    store = SQLiteStore(db)
    totals: Counter[str] = Counter()
    for n in range(runs):
        run_id = f"run-{n}"
        mode, status = "run", "none"
        for _ in range(MAX_ATTEMPTS):
            totals["processes"] += 1
            proc, deadline = _started(rng, how, db, log, run_id, mode)
            totals["kills"] += _stopped(proc, deadline, how)
            try:
                state = asyncio.run(store.load(run_id))
            except LoopstateError:
                continue  # killed before the run was created: start it again
            mode = "resume"
            status = state.status
            if status in ("done", "failed", "aborted"):
                break
            if status == "awaiting_approval" and not state.inbox:
                pending = state.pending[0].call_id
                asyncio.run(
                    queue_decision(store, run_id, pending, {"kind": "approve"}, actor="campaign")
                )
                totals["decisions"] += 1
            if how == signal.SIGKILL:
                time.sleep(0.55)  # let a killed holder's lease lapse (a live one is renewed)
        final = asyncio.run(store.load(run_id)) if status != "none" else None
        if final is None or final.status != "done":
            totals["unrecoverable"] += 1
            print(f"{run_id}: {final.state if final else 'never created'}", file=sys.stderr)
            continue
        charges = [c for c in final.calls if c.tool == "charge"]
        if not charges or charges[0].decided_by != "campaign":
            totals["lost_decisions"] += 1
    effects = Counter(line.split()[0] for line in Path(log).read_text().splitlines()
                      if line.endswith(" charge"))  # fmt: skip
    totals["duplicated"] = sum(count - 1 for count in effects.values() if count > 1)
    totals["runs"] = runs
    return dict(totals)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, nargs="?", default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--signal", choices=["KILL", "INT", "TERM"], default="KILL")
    args = parser.parse_args()
    started = time.perf_counter()
    totals = campaign(args.runs, args.seed, signal.Signals[f"SIG{args.signal}"])
    print(
        f"runs {totals['runs']}, processes {totals.get('processes', 0)}, "
        f"kills {totals.get('kills', 0)}, decisions queued {totals.get('decisions', 0)}"
    )
    print(
        f"duplicated executions {totals.get('duplicated', 0)} (must be 0), "
        f"lost decisions {totals.get('lost_decisions', 0)} (0), "
        f"unrecoverable runs {totals.get('unrecoverable', 0)} (0)"
    )
    print(f"{time.perf_counter() - started:.1f} s")
    bad = totals.get("duplicated", 0) + totals.get("lost_decisions", 0)
    sys.exit(1 if bad + totals.get("unrecoverable", 0) else 0)


if __name__ == "__main__":
    main()
