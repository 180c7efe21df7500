"""Record the histories the Temporal replay test checks (python tests/record_temporal_histories.py).

Runs each scenario of `temporal_scenarios` on a fresh dev server and writes every workflow
run's history (a continued-as-new run has several) to tests/temporal_histories/NAME.json.
Record again only when a change to the loop is meant to change its commands, and then guard
the old path with `workflow.patched` (see docs/temporal.md) so running workflows replay.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import temporal_scenarios as scenarios
from temporal_support import Served, serving
from temporalio.client import Client

from loopstate.engine.tree import child_runs
from loopstate.temporal.devserver import dev_server

OUT = Path(__file__).parent / "temporal_histories"


async def histories(client: Client, workflow_id: str) -> list[dict[str, object]]:
    runs = [e async for e in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    recorded = []
    for execution in sorted(runs, key=lambda e: e.start_time):
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        history = await handle.fetch_history()
        recorded.append(json.loads(history.to_json()))
    return recorded


async def record(address: str) -> None:
    OUT.mkdir(exist_ok=True)
    simple = [scenarios.approve, scenarios.deny, scenarios.edit, scenarios.abort]
    simple += [scenarios.partial_batch, scenarios.sub_agent, scenarios.flow_agent_phase]
    simple.append(scenarios.coaching)
    for scenario in simple:
        await _one(address, scenario.__name__, None, scenario)
    await _one(address, "continue_as_new", scenarios.CONTINUE_SETTINGS, scenarios.continue_as_new)

    async def crash(s: Served) -> str:
        return await scenarios.crash_mid_tool(s, address)

    await _one(address, "crash_mid_tool", scenarios.CRASH_SETTINGS, crash, worker=False)

    async def crash_waiting(s: Served) -> str:
        return await scenarios.crash_mid_approval(s, address)

    await _one(address, "crash_mid_approval", None, crash_waiting, worker=False)


async def _one(address: str, name: str, settings: object, scenario, worker: bool = True) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as workdir:
        async with serving(address, Path(workdir), settings=settings, worker=worker) as s:  # type: ignore[arg-type]
            run_id = await scenario(s)
            recorded = await histories(s.client, run_id)
            below = [c for _, c in child_runs(await s.runs.state(run_id))] if worker else []
            for child in below:  # a child workflow's history: NAME__child.json
                kept = await histories(s.client, child)
                (OUT / f"{name}__child.json").write_text(json.dumps(kept, indent=1) + "\n")
    (OUT / f"{name}.json").write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"recorded {name}: {len(recorded)} workflow run(s), {len(below)} child(ren)")


if __name__ == "__main__":
    with dev_server() as address:
        asyncio.run(record(address))
