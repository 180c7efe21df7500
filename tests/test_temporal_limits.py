"""Limits on runs on Temporal: pause from another process and resume, approval deadlines as
durable timers (applied once, racing a decision: one outcome), a budget stop and resume, and
rules that forbid (the decision Update refuses, naming the rule) and gate."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support import forking
from support.waiting import until
from temporal_limits_agents import replays, served, served_before_patches, state_is
from temporal_support import wait_pending
from temporalio.client import Client

from loopstate import ApprovalRequest, Budget, DecisionError, RunNotResumable, RunResult

USER = getpass.getuser()
DENIED = "Denied: the reviewer did not allow this call. Reason:"


async def cli(*args: str) -> tuple[int, str, str]:
    """`loopstate ARGS` as a process of its own."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    process = await asyncio.to_thread(
        forking.run, [sys.executable, "-m", "loopstate", *args], env=env,
        capture_output=True, timeout=60,
    )  # fmt: skip
    out, err = process.stdout, process.stderr
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def when(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def told(result: RunResult) -> list[tuple[str, str]]:
    """What the model was told and said, in order."""
    return [(m.role, str(m.content)) for m in result.messages]


async def test_a_run_paused_from_another_process_stops_at_a_step_boundary_and_resumes_to_the_same_end(  # noqa: E501
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        (tmp_path / "release").touch()
        plain = await runs.result(await runs.start("pausing", "look things up"))
        for left in ("release", "lookups.txt", "held"):  # `held` too: else the wait below
            (tmp_path / left).unlink()  # would not wait, and a slow run be paused before it
        where = ["--address", temporal_address, "--task-queue", runs.task_queue]

        run_id = await runs.start("pausing", "look things up")
        await until(lambda: (tmp_path / "held").exists())  # the `hold` call is in flight
        code, out, err = await cli("temporal", "pause", run_id, *where)
        assert code == 0, err
        assert "stops at its next step boundary" in out
        (tmp_path / "release").touch()
        paused = await state_is(runs, run_id, "paused")
        assert paused.status == "paused"
        assert [c.status for c in paused.calls] == ["succeeded", "succeeded"]  # nothing half-done
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"  # no step after the boundary
        assert not await runs.pause(run_id)  # a paused run stays as it is
        await runs.resume(run_id)
        result = await runs.result(run_id)
        await replays(runs, run_id)
    assert result.status == "done"
    assert told(result) == told(plain)
    path = [(t.source, t.target) for t in result.transitions]
    at = path.index(("thinking", "paused"))
    assert path[at - 2 : at + 2] == [  # after the batch the `hold` call was in, before the next
        ("thinking", "executing_tool"),
        ("executing_tool", "thinking"),
        ("thinking", "paused"),
        ("paused", "thinking"),
    ]
    assert (result.transitions[at].actor, result.transitions[at + 1].actor) == (
        f"cli:{USER}",
        "user",
    )
    assert (tmp_path / "lookups.txt").read_text() == "k1\nk3\n"


async def test_pausing_a_run_that_waits_for_a_decision_keeps_it_waiting(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("ruled", "write the notes")
        await wait_pending(runs, run_id)
        assert not await runs.pause(run_id)
        with pytest.raises(RunNotResumable, match="not paused or budget_exceeded"):
            await runs.resume(run_id)
        state = await runs.state(run_id)
        assert (state.state, [p.call_id for p in await runs.pending(run_id)]) == (
            "awaiting_approval",
            ["notes"],
        )
        await runs.abort(run_id, "done testing")


async def test_temporal_pending_shows_each_calls_deadline_soonest_first(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        mine = {}
        for agent in ("undue", "due_later", "due_soon"):  # started latest deadline first
            run_id = await runs.start(agent, "file it")
            [mine[run_id]] = await wait_pending(runs, run_id)
        where = ["--address", temporal_address, "--task-queue", runs.task_queue]

        async def listed() -> list[str]:
            """my three runs' calls, once the inbox (eventually consistent) lists them all"""
            code, out, err = await cli("temporal", "pending", *where)
            assert code == 0, err
            lines = [line for line in out.splitlines() if line.split("  ")[0] in mine]
            return lines if len(lines) == 3 else []

        lines = await until(listed, every=0.1)
        for run_id in mine:
            await runs.abort(run_id, "done testing")
    soon, later, undue = (mine[line.split("  ")[0]] for line in lines)
    assert [soon.tool, later.tool, undue.tool] == ["archive", "shelve", "write_note"]
    assert soon.deadline is not None
    assert later.deadline is not None
    escaped = 'archive {"text": "a\\u001b[31m"}'  # the model's text, escaped
    assert lines[0].endswith(f"{escaped}  due {when(soon.deadline)}")
    assert lines[1].endswith(f"  due {when(later.deadline)}")
    assert lines[2].endswith('write_note {"path": "n", "text": "x"}')  # no deadline


async def test_a_deadline_denies_a_call_once_when_it_passes_and_the_model_sees_it(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("deadline", "publish hi")
        [request] = await wait_pending(runs, run_id)
        assert request.deadline is not None
        result = await runs.result(run_id)
        await replays(runs, run_id)
    assert result.status == "done"
    assert result.output == f"final: {DENIED} no answer in time"
    assert not (tmp_path / "published.txt").exists()
    [expired] = [t for t in result.transitions if t.source == "awaiting_approval"]
    assert (expired.event, expired.actor) == ("expired", "deadline")
    assert expired.at >= request.deadline  # never early (workflow time)
    decided = [e for e in result.events if e.kind == "tool_approval"]
    assert [(e.outcome, e.actor) for e in decided] == [("deny", "deadline")]  # type: ignore[attr-defined]


async def test_a_decision_and_a_deadline_in_the_same_workflow_task_give_one_outcome(
    temporal_address: str, tmp_path: Path
) -> None:
    """The worker is away while the deadline passes and the decision arrives: both reach the
    workflow in one task, on the next worker (the timer is the server's)."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with served(temporal_address, tmp_path, queue) as runs:
        run_id = await runs.start("deadline", "publish hi")
        await wait_pending(runs, run_id)
    client: Client = runs.client
    handle = client.get_workflow_handle(run_id)
    approving = asyncio.create_task(runs.approve(run_id, "pub_1"))

    async def timer_fired() -> bool:
        """the deadline's timer fired on the server"""
        events = (await handle.fetch_history()).events
        return any(e.HasField("timer_fired_event_attributes") for e in events)

    await until(timer_fired, every=0.1)
    async with served(temporal_address, tmp_path, queue):
        try:
            await approving
            approved = True
        except DecisionError:
            approved = False
        result = await runs.result(run_id)
        await replays(runs, run_id)
    decided = [e for e in result.events if e.kind == "tool_approval"]
    assert len(decided) == 1
    published = (tmp_path / "published.txt").read_text() if approved else ""
    if approved:
        assert (decided[0].outcome, decided[0].actor) == ("approve", "user")  # type: ignore[attr-defined]
        assert published == "hi\n"
    else:
        assert (decided[0].outcome, decided[0].actor) == ("deny", "deadline")  # type: ignore[attr-defined]
        assert not (tmp_path / "published.txt").exists()


async def test_a_tool_call_budget_stops_before_a_batch_and_a_raised_one_resumes_it(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("budgeted", "look four things up")
        stopped = await state_is(runs, run_id, "budget_exceeded")
        assert stopped.failure is not None
        assert stopped.failure.budget is not None
        assert stopped.failure.budget.limit == "tool_calls"
        assert "budget tool_calls exceeded before a tool batch" in (stopped.error or "")
        assert (tmp_path / "lookups.txt").read_text() == "k1\nk2\n"  # the third never started
        with pytest.raises(RunNotResumable, match="still over its budget: budget tool_calls"):
            await runs.resume(run_id, budget=Budget(tool_calls=2))
        where = ["--address", temporal_address, "--task-queue", runs.task_queue]
        code, out, err = await cli("temporal", "resume", run_id, "--budget", "tool_calls=4", *where)
        assert (code, out.strip()) == (0, f"resume accepted for run {run_id}"), err
        result = await runs.result(run_id)
        await replays(runs, run_id)
    assert result.status == "done"
    assert result.output == "final: value of k4"
    assert (tmp_path / "lookups.txt").read_text() == "k1\nk2\nk3\nk4\n"
    path = [(t.source, t.target, t.event) for t in result.transitions]
    assert ("executing_tool", "budget_exceeded", "over_budget") in path
    assert ("budget_exceeded", "executing_tool", "budget_raised") in path


async def test_a_forbidding_rule_refuses_an_approval_by_update_and_a_gating_rule_makes_a_call_wait(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("ruled", "write the notes")
        [request] = await wait_pending(runs, run_id)
        assert request.call_id == "notes"  # the /etc call was denied at once, asking no one
        with pytest.raises(DecisionError, match="forbidden by rule no-etc"):
            await runs.approve(run_id, "etc")
        await runs.approve(run_id, "notes")
        [gated] = await wait_pending(runs, run_id)  # `lookup` asks nothing; the rule gates it
        assert (gated.call_id, gated.reason) == (
            "look_1",
            "lookup needs approval (rule ask-lookup)",
        )
        await runs.approve(run_id, "look_1")
        result = await runs.result(run_id)
    assert result.status == "done"
    assert (tmp_path / "notes.txt").read_text() == "y\n"
    assert not (tmp_path / "passwd").exists()
    assert ("tool", f"{DENIED} system files are off limits") in told(result)


async def test_an_escalating_deadline_hands_the_call_on_and_it_keeps_waiting(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("escalating", "publish hi")

        async def escalated() -> list[ApprovalRequest]:
            """the call, escalated to the lead"""
            calls = await runs.pending(run_id)
            return [c for c in calls if "escalated to lead" in c.reason]

        [request] = await until(escalated, every=0.05)
        assert request.deadline is None  # no further deadline
        await runs.approve(run_id, request.call_id, actor="lead")
        result = await runs.result(run_id)
        await replays(runs, run_id)
    assert result.output == "final: published 'hi'"
    [decided] = [e for e in result.events if e.kind == "tool_approval"]
    assert (decided.outcome, decided.actor) == ("approve", "lead")  # type: ignore[attr-defined]


async def test_a_flows_model_phase_keeps_a_deadline_and_pauses_and_resumes(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        expiring = await runs.start_flow("publishing", "publish hi")
        run_id = await runs.start_flow("pausing_flow", "look things up")
        await until(lambda: (tmp_path / "held").exists())  # the `hold` call is in flight
        await runs.pause(run_id, wait=False)  # the Signal: fire and forget
        (tmp_path / "release").touch()
        await state_is(runs, run_id, "paused")
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        await runs.resume(run_id)
        paused = await runs.flow_result(run_id)
        expired = await runs.flow_result(expiring)
        await replays(runs, run_id)
        await replays(runs, expiring)
    assert (paused.status, paused.output) == ("done", "final: value of k3")
    assert (tmp_path / "lookups.txt").read_text() == "k1\nk3\n"
    assert expired.status == "done"
    assert expired.output == f"final: {DENIED} no answer in time"
    [timed] = [t for t in expired.transitions if t.event == "expired"]
    assert timed.actor == "deadline"


async def test_a_budget_counts_the_sub_agents_child_workflow(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("treed", "research")
        stopped = await state_is(runs, run_id, "budget_exceeded")
        assert stopped.failure is not None
        assert stopped.failure.budget is not None
        assert (stopped.failure.budget.limit, stopped.failure.budget.spent.model_calls) == (
            "model_calls",
            3,  # its own one and its child's two
        )
        await runs.resume(run_id, budget=Budget(model_calls=4))
        result = await runs.result(run_id)
    assert (result.status, result.output) == ("done", "final: final: value of k1")
    assert result.steps == 2


async def test_a_run_that_waited_on_a_deadline_before_the_timers_replays_without_one(
    temporal_address: str, tmp_path: Path
) -> None:
    """A worker from before deadline timers (`workflow.patched` answers False, as for a
    history without the patch's marker) records a waiting run with no timer; today's code
    replays it: it makes no timer that history never had."""
    async with served_before_patches(temporal_address, tmp_path) as runs:
        run_id = await runs.start("deadline", "publish hi")
        await wait_pending(runs, run_id)
        await runs.approve(run_id, "pub_1")
        result = await runs.result(run_id)
    assert result.output == "final: published 'hi'"
    history = (await runs.client.get_workflow_handle(run_id).fetch_history()).events
    assert not any(e.HasField("timer_started_event_attributes") for e in history)
    await replays(runs, run_id)
