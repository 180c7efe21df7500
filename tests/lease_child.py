"""A child process for the lease tests: one run whose only tool outlives the run's lease.

python lease_child.py DB LOG --lease S (--hold S | --release FILE)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from support.waiting import until

from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore

parser = argparse.ArgumentParser()
parser.add_argument("db")
parser.add_argument("log")
parser.add_argument("--lease", type=float, required=True)
parser.add_argument("--hold", type=float, default=0.0, help="seconds the tool blocks")
parser.add_argument("--release", type=Path, help="the tool blocks until this file exists")
args = parser.parse_args()
LOG = Path(args.log)


@tool
async def charge(amount: int) -> str:
    """Charge a card: not idempotent, and slow."""
    with LOG.open("a") as f:
        f.write(f"charge {amount} started {time.time()}\n")
    await asyncio.sleep(args.hold)
    if args.release is not None:
        await until(args.release.exists)  # the parent's signal: it has tried to take the run over
    return f"charged {amount}"


agent = Agent(
    ScriptedModel([call("charge", {"amount": 5}), "Charged."]),
    [charge],
    store=SQLiteStore(args.db),
    lease_s=args.lease,
    ids=lambda: "run-1",
)
result = asyncio.run(agent.run("charge me"))
print(json.dumps({"status": result.status, "output": result.output}))
