"""Helpers for the Temporal tests: a client, and a worker in this process on a queue of its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from support.waiting import until
from temporal_agents import agents
from temporalio.client import Client

from loopstate import ApprovalRequest
from loopstate.temporal import RunSettings, TemporalRuns, agent_worker, data_converter


@dataclass
class Served:
    runs: TemporalRuns
    client: Client
    workdir: Path
    task_queue: str


async def connect(address: str, blobs: Path | None = None) -> Client:
    for _ in range(50):  # the server listens a moment before its frontend answers
        try:
            return await Client.connect(address, data_converter=data_converter(blobs))
        except RuntimeError:
            await asyncio.sleep(0.1)
    return await Client.connect(address, data_converter=data_converter(blobs))


@asynccontextmanager
async def serving(
    address: str,
    workdir: Path,
    *,
    settings: RunSettings | None = None,
    blobs: Path | None = None,
    worker: bool = True,
) -> AsyncIterator[Served]:
    """A client and, unless `worker=False`, a worker serving `temporal_agents` in this process."""
    client = await connect(address, blobs)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    runs = TemporalRuns(client, task_queue=queue, settings=settings)
    served = Served(runs, client, workdir, queue)
    if not worker:
        yield served
        return
    async with agent_worker(client, agents(workdir), task_queue=queue):
        yield served


async def wait_pending(runs: TemporalRuns, run_id: str, count: int = 1) -> list[ApprovalRequest]:
    """The run's pending calls once there are `count` of them."""

    async def pending() -> list[ApprovalRequest]:
        """the run's pending calls, once there are `count` of them"""
        calls = await runs.pending(run_id)
        return calls if len(calls) == count else []

    return await until(pending, every=0.05)
