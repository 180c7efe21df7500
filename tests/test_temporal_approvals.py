"""An agent run on Temporal: decisions by validated Update, by Signal, and abort."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import forking
from support.waiting import until
from temporal_support import serving, wait_pending
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from loopstate import Approve, DecisionError, Deny, RunNotResumable
from loopstate.engine.approval import Result
from loopstate.temporal import DecideRequest


async def test_an_approved_call_runs_once_and_the_model_sees_its_result(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        [request] = await wait_pending(s.runs, run_id)
        assert (request.call_id, request.tool) == ("note_1", "write_note")
        await s.runs.approve(run_id, "note_1")
        result = await s.runs.result(run_id)
    assert result.status == "done"
    assert result.output == "final: appended 'hello' to notes.txt"
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    assert [(t.source, t.target) for t in result.transitions] == [
        ("idle", "thinking"),
        ("thinking", "awaiting_approval"),
        ("awaiting_approval", "executing_tool"),
        ("executing_tool", "thinking"),
        ("thinking", "done"),
    ]
    assert result.transitions[2].actor == "user"
    kinds = [e.kind for e in result.events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert "tool_approval" in kinds
    assert "tool_finished" in kinds


async def test_a_denied_call_does_not_run_and_the_model_is_told_why(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        await s.runs.deny(run_id, "note_1", "not today")
        result = await s.runs.result(run_id)
    assert result.status == "done"
    assert "Reason: not today" in (result.output or "")
    assert not (tmp_path / "notes.txt").exists()


async def test_an_edit_is_validated_at_once_and_runs_with_the_edited_arguments(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        with pytest.raises(DecisionError, match="text"):
            await s.runs.edit(run_id, "note_1", {"path": "notes.txt", "text": 42})
        await s.runs.edit(run_id, "note_1", {"path": "notes.txt", "text": "edited"})
        result = await s.runs.result(run_id)
    assert (tmp_path / "notes.txt").read_text() == "edited\n"
    assert "The reviewer edited the arguments" in (result.output or "")


async def test_refused_decisions_say_why_and_leave_no_trace_in_history(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        [request] = await wait_pending(s.runs, run_id)
        handle = s.client.get_workflow_handle(run_id)
        before = len((await handle.fetch_history()).events)
        with pytest.raises(DecisionError, match="no call nope"):
            await s.runs.approve(run_id, "nope")
        with pytest.raises(DecisionError, match="other arguments"):
            await s.runs.decide(run_id, "note_1", Approve(digest="0" * 16))
        malformed = DecideRequest(call_id="note_1", decision={"kind": "maybe"})
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("decide", malformed)
        assert "not a decision" in str(refused.value.cause)
        assert len((await handle.fetch_history()).events) == before
        await s.runs.decide(run_id, "note_1", Approve(digest=request.digest))
        with pytest.raises(DecisionError, match="used once"):
            await s.runs.deny(run_id, "note_1", "too late")
        result = await s.runs.result(run_id)
        with pytest.raises(RunNotResumable, match="has ended"):
            await s.runs.approve(run_id, "note_1")
    assert result.status == "done"
    assert (tmp_path / "notes.txt").read_text() == "hello\n"


async def test_a_parallel_batch_waits_until_every_gated_call_is_decided(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("batch", "two notes")
        pending = await wait_pending(s.runs, run_id, 2)
        assert [p.call_id for p in pending] == ["note_a", "note_b"]
        await s.runs.approve(run_id, "note_a")
        [left] = await wait_pending(s.runs, run_id, 1)
        assert left.call_id == "note_b"
        state = await s.runs.state(run_id)
        assert state.state == "awaiting_approval"
        assert not (tmp_path / "a.txt").exists()  # nothing runs until the batch is decided
        await s.runs.deny(run_id, "note_b", "only A")
        result = await s.runs.result(run_id)
    assert (tmp_path / "a.txt").read_text() == "A\n"
    assert not (tmp_path / "b.txt").exists()
    assert result.output is not None
    assert result.output.startswith("final: appended 'A' to a.txt | Denied")
    assert result.output.endswith("| value of x")


async def test_an_abort_ends_the_run_without_running_the_call(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        await s.runs.abort(run_id, "changed my mind", actor="alice")
        result = await s.runs.result(run_id)
        with pytest.raises(RunNotResumable, match="has ended"):
            await s.runs.abort(run_id, "again")
    assert result.status == "aborted"
    assert result.stop_reason == "aborted: changed my mind"
    assert result.transitions[-1].actor == "alice"
    assert not (tmp_path / "notes.txt").exists()


async def test_an_abort_decision_ends_the_run_too(temporal_address: str, tmp_path: Path) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        await s.runs.decide(run_id, "note_1", {"kind": "abort", "reason": "stop"})
        result = await s.runs.result(run_id)
    assert result.status == "aborted"
    assert not (tmp_path / "notes.txt").exists()


async def test_signalled_decisions_apply_and_a_refused_one_is_reported(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        await s.runs.decide(run_id, "note_1", Approve(digest="0" * 16), wait=False)
        await s.runs.decide(run_id, "note_1", Deny("by signal"), wait=False)
        result = await s.runs.result(run_id)
    refused = [e for e in result.events if e.kind == "decision_refused"]
    assert len(refused) == 1
    assert "other arguments" in refused[0].reason
    assert "Reason: by signal" in (result.output or "")


async def test_the_inbox_lists_pending_calls_with_no_worker_running(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("batch", "two notes")
        await wait_pending(s.runs, run_id, 2)
    async with serving(temporal_address, tmp_path, worker=False) as bare:

        async def listed() -> list[Any]:  # visibility is eventually consistent
            calls = [c for c in await bare.runs.inbox(agent="batch") if c.run_id == run_id]
            return calls if len(calls) == 2 else []

        inbox = await until(listed, every=0.05)
        assert [(c.call_id, c.tool, c.arguments["path"]) for c in inbox] == [
            ("note_a", "write_note", "a.txt"),
            ("note_b", "write_note", "b.txt"),
        ]
        await bare.runs.abort(run_id, "cleanup", wait=False)  # a signal needs no worker


async def test_a_run_of_an_agent_no_worker_serves_fails_with_the_reason(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("nobody", "hello")
        with pytest.raises(WorkflowFailureError) as failed:
            await s.runs.result(run_id)
    gc.collect()  # the failed workflow's leftovers go now, not during another test
    assert "this worker serves no agent 'nobody'" in str(failed.value.cause)


async def test_an_external_tools_result_is_supplied_by_update_checked_and_seen_by_the_model(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("asker", "ask them")
        [request] = await wait_pending(s.runs, run_id)
        assert (request.tool, request.external) == ("ask_person", True)
        with pytest.raises(DecisionError, match="does not accept 'approve'"):
            await s.runs.approve(run_id, "ask_1")
        with pytest.raises(DecisionError, match=r"result for call ask_1 .* refused"):
            await s.runs.decide(run_id, "ask_1", Result(12))
        await s.runs.decide(run_id, "ask_1", Result("yes, ship it"), actor="alice")
        result = await s.runs.result(run_id)
    assert (result.status, result.output) == ("done", "final: yes, ship it")
    assert result.transitions[2].actor == "alice"


async def test_the_cli_supplies_an_external_result_to_a_temporal_run(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("asker", "ask them")
        await wait_pending(s.runs, run_id)
        where = ["--address", temporal_address]
        bad = await loopstate("temporal", "result", run_id, "ask_1", "--value", "7", *where)
        assert bad.returncode == 2
        assert bad.stderr.startswith("loopstate temporal result: result for call ask_1")
        assert len(bad.stderr.strip().splitlines()) == 1
        value = json.dumps("ship it")
        good = await loopstate("temporal", "result", run_id, "ask_1", "--value", value, *where)
        assert good.stdout == f"result accepted for ask_1 of run {run_id}\n", good.stderr
        result = await s.runs.result(run_id)
    assert (result.status, result.output) == ("done", "final: ship it")
    assert (result.transitions[2].actor or "").startswith("cli:")


async def loopstate(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        forking.run, [sys.executable, "-m", "loopstate", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
