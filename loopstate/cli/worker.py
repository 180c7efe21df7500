"""`loopstate worker`: claim stored runs that are ready and resume them, until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from loopstate.cli.errors import report
from loopstate.cli.stores import add_db_option, close_store, db_of, open_store
from loopstate.engine.errors import LoopstateError
from loopstate.engine.store import DEFAULT_LEASE_S


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="resume stored runs that are ready (decided, or left by a crashed process)",
        description="Claim runs that are ready to continue and resume each to its next stop, "
        "until SIGTERM or SIGINT: the runs in hand then finish their resume, leases are "
        "released and the worker exits 0. Start several, on several hosts, on one store.",
    )
    parser.add_argument(
        "--agent", required=True, help="module:attr of the Agent or Flow (or a function)"
    )
    add_db_option(parser)
    parser.add_argument("--concurrency", type=int, default=4, help="runs resumed at once")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between empty claims")
    parser.add_argument(
        "--lease", type=float, default=DEFAULT_LEASE_S, help="lease seconds (%(default)s)"
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        resumed = asyncio.run(_serve(args))
    except LoopstateError as exc:
        return report("worker", exc)
    print(f"loopstate worker: stopped after resuming {resumed} runs", file=sys.stderr)
    return 0


async def _serve(args: argparse.Namespace) -> int:
    from loopstate.cli.lookup import load_agent
    from loopstate.worker import Worker

    store = open_store(db_of(args))
    try:
        await store.list_runs(limit=1)  # a store that cannot be used: one line, not a crash
        target = load_agent(args.agent).clone(store=store, lease_s=args.lease)
        worker = Worker(target, concurrency=args.concurrency, poll_s=args.poll, lease_s=args.lease)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        print(f"loopstate worker {worker.owner}: serving {store!r}", file=sys.stderr, flush=True)
        await worker.serve(stop)
        return worker.resumed
    finally:
        await close_store(store)
