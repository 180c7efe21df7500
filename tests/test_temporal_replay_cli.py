"""Temporal histories are the user's to replay: `loopstate temporal replay` passes on a
committed history against its agent, and names the gated tool the agent lost when it fails;
`loopstate temporal show` answers within 2 s for a run no worker answers for."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from support import forking
from temporal_support import serving
from temporalio import workflow

from loopstate import Agent
from loopstate.machines.agent.delegation import AgentTool
from loopstate.temporal import replay_history
from loopstate.temporal.data import WORKFLOW

pytestmark = pytest.mark.slow

TESTS = Path(__file__).parent
APPROVE = TESTS / "temporal_histories" / "approve.json"


@workflow.defn(name=WORKFLOW)
class BrokenAgentWorkflow:
    """Workflow code deployed with a bug: each of its tasks fails, and Temporal retries it.
    (A changed agent no longer does this to a run: see `test_temporal_redeploy`.)"""

    @workflow.run
    async def run(self, start: dict[str, object]) -> None:
        raise RuntimeError("a bug in the deployed workflow code")


def loopstate(*args: str) -> subprocess.CompletedProcess[str]:
    return forking.run([sys.executable, "-m", "loopstate", *args], cwd=TESTS,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_committed_history_replays_against_its_agent() -> None:
    done = loopstate("temporal", "replay", str(APPROVE), "--agent", "temporal_agents:writer")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{APPROVE}: 1 history(ies) replay against temporal_agents:writer"


def test_replay_without_the_gated_tool_fails_naming_it_before_temporals_message() -> None:
    agent = "temporal_agents:writer_without_write_note"
    done = loopstate("temporal", "replay", str(APPROVE), "--agent", agent)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()  # one paragraph, no traceback, no core log
    said, _, temporal = line.partition(" Temporal says: ")
    assert said == (
        "loopstate temporal replay: agent 'writer' does not replay its recorded run: since it "
        "ran, the agent removed write_note (gated)."
    )
    assert "Nondeterminism" in temporal


async def test_replay_history_is_the_same_check_from_python(tmp_path: Path) -> None:
    from temporal_agents import agents

    looper = agents(tmp_path)["looper"]
    history = TESTS / "temporal_histories" / "continue_as_new.json"
    report = await replay_history(history, looper)
    assert (report.ok, report.histories) == (True, 3)
    reordered = looper.clone(tools=list(reversed(list(looper.tools))))
    assert (await replay_history(history, reordered)).ok  # the order reaches no command
    without = looper.clone(tools=[t for t in looper.tools if t.name != "lookup"])
    failed = await replay_history(history, without)
    assert not failed.ok
    assert "since it ran, the agent removed lookup." in (failed.error or "")


async def test_show_answers_within_two_seconds_when_no_worker_serves_the_run(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path, worker=False) as s:
        run_id = await s.runs.start("writer", "note hello", run_id="nobody-serves-it")
        shown = loopstate("temporal", "show", run_id, "--address", temporal_address,
                          "--task-queue", s.task_queue)  # fmt: skip
    assert shown.returncode == 2
    # The answer comes from the query's own 1.5 s limit, not from waiting on the run: a wall
    # clock around the process would measure the machine's load, not the CLI.
    assert shown.stderr.strip() == (
        f"loopstate temporal show: run {run_id}: no worker answered within 1.5 s "
        f"(is one serving {s.task_queue}?)"
    )


async def test_show_says_so_within_two_seconds_when_the_runs_workflow_task_fails(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporal_support import wait_pending
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    async with serving(temporal_address, tmp_path) as s:  # a worker with the recorded agent
        run_id = await s.runs.start("writer", "note hello", run_id="task-fails")
        await wait_pending(s.runs, run_id)
    broken = Worker(s.client, task_queue=s.task_queue, workflows=[BrokenAgentWorkflow],
                    workflow_runner=UnsandboxedWorkflowRunner())  # fmt: skip
    async with broken:  # a deploy whose workflow code fails every task of the run
        await s.runs.decide(run_id, "note_1", {"kind": "approve"}, wait=False)
        handle = s.client.get_workflow_handle(run_id)
        for _ in range(2400):  # until Temporal retries the failed workflow task (2 min margin)
            described = await handle.describe()
            if described.raw_description.pending_workflow_task.attempt > 1:
                break
            await asyncio.sleep(0.05)
        shown = await asyncio.to_thread(
            loopstate, "temporal", "show", run_id, "--address", temporal_address,
            "--task-queue", s.task_queue,
        )  # fmt: skip
    assert shown.returncode == 2
    said = shown.stderr.strip()
    assert said.startswith(f"loopstate temporal show: run {run_id}: its workflow task has failed")
    assert "`loopstate temporal replay` its history" in said


async def test_flow_and_child_histories_replay_against_the_top_flow_or_agent(
    tmp_path: Path,
) -> None:
    from temporal_agents import agents

    served = agents(tmp_path)
    histories = TESTS / "temporal_histories"
    for name, top in (("coaching", "coaching"), ("flow_agent_phase__child", "pipeline"),
                      ("sub_agent__child", "boss")):  # fmt: skip
        report = await replay_history(histories / f"{name}.json", served[top])
        assert (report.ok, report.error) == (True, None), name
    boss = served["boss"]
    assert isinstance(boss, Agent)
    [delegate] = [t for t in boss.tools if isinstance(t, AgentTool) and t.agent is not None]
    assert delegate.agent is not None
    lost = delegate.agent.clone(tools=[t for t in delegate.agent.tools if t.name != "write_note"])
    changed = boss.clone(tools=[lost.as_tool(name="research", description="Delegate a task")])
    failed = await replay_history(histories / "sub_agent__child.json", changed)
    assert not failed.ok
    assert (failed.error or "").startswith(
        "agent 'boss/research' does not replay its recorded run: since it ran, the agent "
        "removed write_note (gated)."
    )
