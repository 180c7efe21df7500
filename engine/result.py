"""What `run()` and `resume()` return."""

from __future__ import annotations

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.data import Frozen
from loopstate.engine.events import Event
from loopstate.engine.failure import RunFailure
from loopstate.engine.messages import Message
from loopstate.engine.model import Usage
from loopstate.engine.state import RunState, RunStatus, Transition


class RunResult(Frozen):
    run_id: str
    status: RunStatus
    """`done`, `failed`, `aborted`, or `awaiting_approval` (suspended: see `pending`)."""
    output: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    failure: RunFailure | None = None
    """For a failed run: the error as data, e.g. a model error's `status` and `retry_after`."""
    messages: tuple[Message, ...] = ()
    transitions: tuple[Transition, ...] = ()
    pending: tuple[ApprovalRequest, ...] = ()
    steps: int = 0
    usage: Usage = Usage()
    events: tuple[Event, ...] = ()
    """The events of this invocation (a resumed run's earlier events are in its store)."""

    @classmethod
    def of(cls, state: RunState, events: tuple[Event, ...] = ()) -> RunResult:
        return cls(
            run_id=state.run_id,
            status=state.status,
            output=state.output,
            stop_reason=state.stop_reason,
            error=state.error,
            failure=state.failure,
            messages=state.messages,
            transitions=state.transitions,
            pending=tuple(state.pending),
            steps=state.steps,
            usage=state.usage,
            events=events,
        )
