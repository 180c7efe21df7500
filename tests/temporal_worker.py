"""A worker process for the Temporal tests: serves `temporal_agents` until it is killed.

usage: python temporal_worker.py ADDRESS WORKDIR TASK_QUEUE [hold]
Prints `ready` once polling. With `hold`, a tool activity prints `tool activity started` and
waits there, before anything of its own runs (a test kills the worker at that point).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from temporal_agents import agents
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from loopstate.temporal import agent_worker, data_converter


class _Held(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> object:
        if activity.info().activity_type == "loopstate.tool":
            print("tool activity started", flush=True)
            await asyncio.Event().wait()
        return await super().execute_activity(input)


class Hold(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Held(next)


async def main(address: str, workdir: Path, task_queue: str, hold: bool) -> None:
    from temporalio.client import Client

    client = await Client.connect(address, data_converter=data_converter())
    interceptors = [Hold()] if hold else []
    worker = agent_worker(client, agents(workdir), task_queue=task_queue, interceptors=interceptors)
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4:] == ["hold"]))
