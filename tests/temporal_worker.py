"""A worker process for the Temporal tests: serves `temporal_agents` until it is killed.

usage: python temporal_worker.py ADDRESS WORKDIR TASK_QUEUE
Prints `ready` once polling.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from temporal_agents import agents

from loopstate.temporal import agent_worker, data_converter


async def main(address: str, workdir: Path, task_queue: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address, data_converter=data_converter())
    async with agent_worker(client, agents(workdir), task_queue=task_queue):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3]))
