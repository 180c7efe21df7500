"""A run's data, separate from its machine: history, calls, transitions, usage, outcome.

Messages and transitions only ever grow (stores append them); the calls of the current batch
change as they are decided and run (stores upsert them); the rest is a small header.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from loopstate.engine.approval import ApprovalRequest, Decision
from loopstate.engine.data import Frozen
from loopstate.engine.failure import RunFailure
from loopstate.engine.messages import Message
from loopstate.engine.model import Usage

SCHEMA_VERSION = 1

CallStatus = Literal[
    "invalid",  # unknown tool or bad arguments: never runs, the model is told why
    "awaiting",  # gated, no decision yet
    "approved",  # will run (ungated, auto-approved, approved or edited)
    "denied",  # will not run; the model is told why
    "running",  # intent written, outcome not yet known
    "succeeded",
    "failed",  # raised or timed out; the model is told why
    "interrupted",  # was running when its process died; outcome unknown
]

_ENDED = ("done", "failed", "aborted")

RunStatus = Literal["running", "awaiting_approval", "awaiting_input", "done", "failed", "aborted"]


class CallRecord(Frozen):
    """One tool call of the run: what the model asked, what was decided, what happened."""

    call_id: str
    tool: str
    raw_arguments: str
    arguments: dict[str, Any] | None = None
    """The validated arguments the model asked for (None if they did not validate)."""
    digest: str = ""
    status: CallStatus
    reason: str = ""
    """Why the call needs approval, or why it is invalid."""
    decision: Decision | None = None
    decided_by: str | None = None
    decided_at: float | None = None
    result: str | None = None
    """The text the model will see; held until the batch's tool messages are appended."""
    attempts: int = 0

    @property
    def executed_arguments(self) -> dict[str, Any] | None:
        if self.decision is not None and self.decision.kind == "edit":
            return self.decision.arguments
        return self.arguments

    def request(self) -> ApprovalRequest:
        return ApprovalRequest(
            call_id=self.call_id,
            tool=self.tool,
            arguments=self.arguments or {},
            reason=self.reason,
            digest=self.digest,
        )


class Transition(Frozen):
    """One audited step of the machine."""

    seq: int
    source: str
    target: str
    event: str
    at: float
    reason: str | None = None
    actor: str | None = None


class QueuedDecision(Frozen):
    """A decision recorded for a suspended run (e.g. from the CLI), applied at its resume."""

    call_id: str
    decision: Decision
    actor: str
    at: float


class RunState(Frozen):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    machine: str = "agent"
    machine_version: int = 1
    state: str = "idle"
    messages: tuple[Message, ...] = ()
    transitions: tuple[Transition, ...] = ()
    calls: tuple[CallRecord, ...] = ()
    batch_start: int = 0
    """Index in `calls` where the current (latest) batch begins."""
    steps: int = 0
    """Model calls made so far."""
    usage: Usage = Usage()
    stop_reason: str | None = None
    output: str | None = None
    error: str | None = None
    failure: RunFailure | None = None
    """What ended the run in `failed`, as data (status, retry-after, ...)."""
    created_at: float = 0.0
    updated_at: float = 0.0
    inbox: tuple[QueuedDecision, ...] = ()
    """Decisions recorded while suspended, not yet applied."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    phase: str | None = None
    """A flow run's phase (the state of its flow machine); None for a plain agent run, whose
    `state` is all there is. In a flow run, `state` is the agent loop's state in the phase,
    or `awaiting_input` while the phase waits for the user's next message."""
    data: dict[str, Any] = Field(default_factory=dict)
    """What a flow has collected so far (JSON values): tool results and structured outputs."""
    phase_step: int = 0
    """`steps` when the current phase was entered (a phase's step budget counts from here)."""
    folded_calls: int = 0
    """Calls before this index have been folded into `data`."""

    @property
    def batch(self) -> tuple[CallRecord, ...]:
        return self.calls[self.batch_start :]

    @property
    def status(self) -> RunStatus:
        if self.phase is not None and self.state in _ENDED and self.phase not in _ENDED:
            return "running"  # a flow between phases: its phase's loop ended, the flow has not
        if self.state in _ENDED or self.state in ("awaiting_approval", "awaiting_input"):
            return self.state  # type: ignore[return-value]
        return "running"

    @property
    def pending(self) -> list[ApprovalRequest]:
        return [c.request() for c in self.batch if c.status == "awaiting"]

    def replace_call(self, record: CallRecord) -> RunState:
        """This state with `record` in place of the current batch's call of the same id."""
        start = self.batch_start
        index = start + next(i for i, c in enumerate(self.batch) if c.call_id == record.call_id)
        calls = (*self.calls[:index], record, *self.calls[index + 1 :])
        return self.evolve(calls=calls)
