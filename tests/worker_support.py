"""Helpers for the worker tests: start `loopstate` subprocesses, wait for runs to end."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from support import forking
from support.waiting import MARGIN

from loopstate import Store

TESTS = Path(__file__).parent


def loopstate_process(*args: str, effects: Path, log: Path, **env: str) -> subprocess.Popen[bytes]:
    """`python -m loopstate ARGS` that can import this folder's modules (the test agent)."""
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "LOOPSTATE_TEST_EFFECTS": str(effects),
        **env,
    }
    with log.open("ab") as out:
        return forking.Popen(
            [sys.executable, "-m", "loopstate", *args], env=environ, stdout=out, stderr=out
        )


async def wait_until_ended(store: Store, count: int, *, within: float = MARGIN) -> None:
    """Until `count` runs have ended (done, failed or aborted), or fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        runs = await store.list_runs(limit=count + 100)
        ended = [r for r in runs if r.status in ("done", "failed", "aborted")]
        if len(ended) >= count:
            return
        if time.monotonic() > deadline:
            statuses = sorted({r.status for r in runs} - {"done"})
            raise AssertionError(f"{len(ended)} of {count} runs ended; others: {statuses}")
        await asyncio.sleep(0.1)


def effects_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
