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
    """What `Agent.run` and `Agent.resume` return: how the run stands and how it got there.

    `status` says which fields matter: `done` → `output` (and `stop_reason` if a limit or a
    `stop_when` ended it); `failed` → `error` and `failure` (why, as data); `aborted` →
    `stop_reason`; `awaiting_approval` → `pending`, the calls to decide before `resume`.
    `print(result)` shows that in one line, e.g. `failed: ModelError: ...`; a run that waits
    names its id, which `resume` and the CLI need.
    """

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

    def __str__(self) -> str:
        """One line: the status and what it means (the answer, the error, the waiting calls)."""
        if self.status == "failed":
            return f"failed: {self.error or 'no error recorded'}"
        if self.status == "awaiting_approval":
            calls = ", ".join(f"{p.call_id} {p.tool}" for p in self.pending)
            return (
                f"awaiting_approval: run {self.run_id} waits for {len(self.pending)} call(s) "
                f"to decide ({calls})"
            )
        if self.status in ("running", "awaiting_input"):
            return f"{self.status}: run {self.run_id} stopped before its end; resume it"
        detail = self.output if self.status == "done" and self.output else self.stop_reason
        return f"{self.status}: {detail}" if detail else self.status

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
