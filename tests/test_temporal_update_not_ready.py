"""An Update Temporal drops because the workflow task carrying it failed (`WorkflowNotReady`:
e.g. the task that ends the run meets a child's end that arrived meanwhile) is sent again,
with the same update id, and applies once; any other refusal is the caller's at once.

The server's answer is injected at the client's edge (the race that makes it cannot be
forced), as the bytes Temporal sends; the run, the worker and the server are real."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporal_support import serving, wait_pending
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.errordetails.v1 import WorkflowNotReadyFailure
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from loopstate import LoopstateError

NOT_READY = "Unable to perform workflow execution update due to unexpected workflow task failure."


def refusal(*, not_ready: bool) -> RPCError:
    """The RPC error Temporal's server sends (FAILED_PRECONDITION; WorkflowNotReady's detail
    when the workflow task carrying the Update failed)."""
    status = GrpcStatus(code=RPCStatusCode.FAILED_PRECONDITION, message=NOT_READY)
    if not_ready:
        status.details.add().Pack(WorkflowNotReadyFailure())
    return RPCError(NOT_READY, RPCStatusCode.FAILED_PRECONDITION, status.SerializeToString())


@dataclass
class Refusing:
    """The next `left` Updates the client sends are refused (WorkflowNotReady if `not_ready`);
    `sent` lists each Update sent, as (name, update id)."""

    not_ready: bool = True
    left: int = 2
    sent: list[tuple[str, str | None]] = field(default_factory=list)


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> Refusing:
    state = Refusing()
    real = WorkflowHandle.execute_update

    async def execute_update(
        self: WorkflowHandle[Any, Any], update: Any, *args: Any, **kw: Any
    ) -> Any:
        state.sent.append((update, kw.get("id")))
        if state.left > 0:
            state.left -= 1
            raise refusal(not_ready=state.not_ready)
        return await real(self, update, *args, **kw)

    monkeypatch.setattr(WorkflowHandle, "execute_update", execute_update)
    return state


async def test_an_update_dropped_by_a_failed_workflow_task_is_sent_again_and_applies_once(
    temporal_address: str, tmp_path: Path, refusing: Refusing
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        await s.runs.approve(run_id, "note_1")
        result = await s.runs.result(run_id)
    assert [name for name, _ in refusing.sent] == ["decide"] * 3
    assert len({update_id for _, update_id in refusing.sent}) == 1  # one Update, sent 3 times
    assert result.status == "done"
    assert (tmp_path / "notes.txt").read_text() == "hello\n"  # the call ran once
    assert sum(t.actor == "user" for t in result.transitions) == 1  # decided once


async def test_another_refusal_is_the_callers_at_once(
    temporal_address: str, tmp_path: Path, refusing: Refusing
) -> None:
    refusing.not_ready, refusing.left = False, 1
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        with pytest.raises(LoopstateError, match="unexpected workflow task failure"):
            await s.runs.approve(run_id, "note_1")
        assert len(refusing.sent) == 1
        await s.runs.abort(run_id, "done testing")  # the next Update reaches the server
        result = await s.runs.result(run_id)
    assert result.status == "aborted"
    assert not (tmp_path / "notes.txt").exists()
