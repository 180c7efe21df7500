"""A run's data, separate from its machine: history, calls, transitions, usage, outcome.

Messages and transitions only ever grow (stores append them); the calls of the current batch
change as they are decided and run (stores upsert them); the rest is a small header.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from loopstate.engine.approval import (
    DECISION_KINDS,
    ApprovalRequest,
    Approve,
    Decision,
    DecisionKind,
    Deny,
)
from loopstate.engine.arguments import Arguments
from loopstate.engine.budget import Budget
from loopstate.engine.data import Frozen
from loopstate.engine.failure import RunFailure
from loopstate.engine.marks import ForkedFrom, Mark
from loopstate.engine.messages import Message
from loopstate.engine.model import Usage
from loopstate.engine.rule import Rule

SCHEMA_VERSION = 2
"""2: a flow's position moved from four top-level fields into `flow` (1 still loads)."""

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

ENDED = ("done", "failed", "aborted")
"""The final states of every machine loopstate drives (checked when a machine is built)."""
_ENDED = ENDED

RunStatus = Literal[
    "running", "awaiting_approval", "awaiting_input", "paused", "done", "failed", "aborted"
]


class Deadline(Frozen):
    """When a pending call's decision is due, and what is decided if none comes by then
    (`on_expiry`: a `Deny`, `Abort` or `Escalate` in its dict form; see `engine/deadlines`)."""

    at: float
    on_expiry: dict[str, Any]


class CallRecord(Frozen):
    """One tool call of the run: what the model asked, what was decided, what happened."""

    call_id: str
    tool: str
    raw_arguments: str
    arguments: Arguments | None = None
    """The validated arguments the model asked for (None if they did not validate);
    read-only, so no hook or approver can change what runs after approval."""
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
    parameters: dict[str, Any] | None = None
    """The tool's JSON schema, kept while the call awaits a decision: an edit recorded by a
    process that does not have the tool (the CLI) is validated against it."""
    external: bool = False
    result_schema: dict[str, Any] | None = None
    """An external tool's declared result type, as JSON schema: a result supplied by a
    process that does not have the tool (the CLI) is validated against it."""
    category: str = "general"
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Set by the tool's approval predicate (`Gate`), shown with the request."""
    allowed: tuple[DecisionKind, ...] = DECISION_KINDS
    """The decisions the tool accepts, kept with the call so that a process without the tool
    (the CLI) refuses the others too."""
    answers: tuple[Any, ...] = ()
    """The answers given so far to the questions its tool asked (`ctx.ask`), in order: the
    body runs again from the start and each `ask` returns its recorded answer."""
    asking: bool = False
    """It waits for the answer to its tool's question (`ctx.ask`), not for its result."""
    deadline: Deadline | None = None
    """When its decision is due (`@tool(decide_within=...)`), while it waits for one."""
    child_run_id: str | None = None
    """The run this call delegated to (a sub-agent used as a tool), once started: a resumed
    parent continues that child instead of starting a new one."""

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
            category=self.category,
            metadata=self.metadata,
            external=self.external,
            allowed=self.allowed,
            deadline=None if self.deadline is None else self.deadline.at,
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
    mark: Mark | None = None
    """The run's shape when the transition was saved (what a fork at it starts from)."""


class Revocation(Frozen):
    """Who withdrew a remembered decision, when and why: kept with it, for the audit."""

    by: str
    at: float
    reason: str = ""


class Remembered(Frozen):
    """A standing decision of one run: every later call of `tool`, or every later call that
    `rule` matches, is decided `decision` — until it is revoked (`revoked` then says by whom
    and when; the entry stays, for the audit)."""

    kind: Literal["remembered"] = "remembered"
    tool: str | None = None
    rule: Rule | None = None
    decision: Literal["approve", "deny"]
    reason: str = ""
    message: str | None = None
    """A remembered denial's exact text for the model (see `Deny.message`)."""
    by: str
    """Who gave the decision that is remembered (audited on each call it decides)."""
    at: float
    revoked: Revocation | None = None

    @model_validator(mode="after")
    def _one_subject(self) -> Remembered:
        if (self.tool is None) == (self.rule is None):
            raise ValueError("a remembered decision is for a tool or for a rule (one of the two)")
        return self

    @property
    def subject(self) -> str:
        """What it covers, as the audit names it: `write`, or `rule db-writes`."""
        return f"rule {self.rule.name}" if self.rule is not None else str(self.tool)

    def covers(self, call: CallRecord) -> bool:
        """Whether it decides `call`: still in force, and the call's tool or a match."""
        if self.revoked is not None:
            return False
        return call.tool == self.tool if self.rule is None else self.rule.matches(call.request())

    def decide(self) -> Decision:
        """The decision it gives, named `<subject> (given by <who>)` in the audit."""
        by = f"{self.subject} (given by {self.by})"
        if self.decision == "approve":
            return Approve(by=by)
        return Deny(self.reason or "denied", message=self.message, by=by)


class QueuedDecision(Frozen):
    """A decision recorded for a suspended run (e.g. from the CLI), applied at its resume."""

    call_id: str
    decision: Decision
    actor: str
    at: float


class Redefinition(Frozen):
    """A resume under another definition than the run's (see `loopstate.engine.compat`): the
    fingerprints before and after, the changes it took (one line each) and the migration
    that mapped the run, if one did. Kept with the run, for the audit."""

    at: float
    by: str
    before: str | None
    """None: the run was started before runs recorded their definition."""
    after: str
    changes: tuple[str, ...] = ()
    migration: str | None = None


class ParentLink(Frozen):
    """Where a child run was started from: the parent run and the call or flow phase that
    delegated to it. A top-level run has none."""

    run_id: str
    call_id: str | None = None
    """The parent's tool call that runs this child (a sub-agent used as a tool)."""
    phase: str | None = None
    """The parent flow's phase that runs this child (a pipeline step)."""
    name: str = ""
    """What the parent calls the child (the tool's or the phase's name)."""


class FlowPosition(Frozen):
    """Where a flow run stands: its phase (a state of the flow's machine) and what it has
    collected. A plain agent run has none."""

    phase: str
    data: dict[str, Any] = Field(default_factory=dict)
    """What the flow has collected so far (JSON values): tool results and structured outputs."""
    phase_step: int = 0
    """The run's `steps` when the phase was entered (its step budget counts from here)."""
    folded_calls: int = 0
    """Calls before this index have been folded into `data`."""
    awaiting_input: bool = False
    """The phase's loop ended and the phase waits for the user's next message."""
    child: str | None = None
    """The child run the current phase's agent runs in (an agent phase), once named: a flow
    resumed after a crash continues that run instead of starting another."""
    children: tuple[str, ...] = ()
    """Every child run the flow's agent phases started, in order."""
    held: str | None = None
    """Why the phase did not advance when its loop last ended, when a gate stayed closed for a
    field it reads being absent (`@reads`): fail closed, with the reason kept."""

    def status(self, loop_state: str) -> RunStatus | None:
        """The flow's own statuses: waiting for the user; running between phases (its loop
        has ended but the run goes on)."""
        if self.awaiting_input:
            return "awaiting_input"
        if loop_state in _ENDED and self.phase not in _ENDED:
            return "running"
        return None


_RESUMABLE_FAILED = ("model_failed", "budget_exceeded")
"""States whose status is `failed` but that `resume` leaves (a retry, a raised budget)."""

_FLOW_FIELDS = ("phase", "data", "phase_step", "folded_calls")


class RunState(Frozen):
    """Everything a run is, apart from its machine object: stored, resumed, replayed."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    machine: str = "agent"
    machine_version: int = 1
    state: str = "idle"
    """The agent loop's state (in a flow, the current phase's loop)."""
    messages: tuple[Message, ...] = ()
    transitions: tuple[Transition, ...] = ()
    calls: tuple[CallRecord, ...] = ()
    batch_start: int = 0
    """Index in `calls` where the current (latest) batch begins."""
    steps: int = 0
    """Model calls made so far."""
    usage: Usage = Usage()
    last_call: Usage | None = None
    """The usage of the latest model call (what the next one is estimated from)."""
    budget: Budget | None = None
    """The run's limits (`Agent(budget=)`), kept with it; `resume(budget=)` raises them."""
    driven_s: float = 0.0
    """Seconds spent in model calls and tools so far (a `wall_s` budget counts them)."""
    stop_reason: str | None = None
    output: str | None = None
    error: str | None = None
    failure: RunFailure | None = None
    """What ended the run in `failed`, as data (status, retry-after, ...)."""
    created_at: float = 0.0
    updated_at: float = 0.0
    inbox: tuple[QueuedDecision, ...] = ()
    """Decisions recorded while suspended, not yet applied."""
    rules: tuple[Rule, ...] = ()
    """The agent's own rules (`Agent(rules=...)`) as the run was last driven: they gate and
    forbid its calls, and every door's decisions are checked against them."""
    remembered: tuple[Remembered, ...] = ()
    """Standing decisions for this run's later calls ("always allow / deny this tool, or
    calls matching this rule"), revoked ones included (marked, for the audit)."""
    child_ready: bool = False
    """A child run this run waits for (a sub-agent's, an agent phase's) has every decision it
    needs: the run is ready to continue (`store.ready`), and its next resume clears this."""
    queued_message: str | None = None
    """A user message that came with decisions: it joins the history after the batch's
    results, before the next model call."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    flow: FlowPosition | None = None
    parent: ParentLink | None = None
    """Set on a child run: which run and call (or phase) delegated to it."""
    definition: str | None = None
    """The fingerprint of the `Definition` the run was started with or last resumed under
    (the store keeps the definition once: `Store.definition`); None for runs started before."""
    redefinitions: tuple[Redefinition, ...] = ()
    """Each resume under a changed definition, and each migration, in order."""
    forked_from: ForkedFrom | None = None
    """Set on a fork (`Agent.fork`): the run and transition it was copied from, and the
    edits made at the fork point."""
    revision: int = 0
    """How many times the store had written the run when this copy was read or saved (every
    save and every recorded decision counts one): a save from an older copy is refused, so a
    writer whose lease ran out cannot drop what was written since (fencing). The store's,
    not the header's: `Store.load` and `Store.save` give it."""

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, value: Any) -> Any:
        """Schema 1 kept a flow's position in four top-level fields."""
        if isinstance(value, dict) and any(k in value for k in _FLOW_FIELDS):
            value = dict(value)
            old = {k: value.pop(k) for k in _FLOW_FIELDS if k in value}
            if old.get("phase") is not None:
                value["flow"] = old
                if value.get("state") == "awaiting_input":
                    value["state"], old["awaiting_input"] = "done", True
            value["schema_version"] = SCHEMA_VERSION
        return value

    @property
    def phase(self) -> str | None:
        """A flow run's phase; None for a plain agent run."""
        return None if self.flow is None else self.flow.phase

    @property
    def batch(self) -> tuple[CallRecord, ...]:
        return self.calls[self.batch_start :]

    @property
    def status(self) -> RunStatus:
        if self.flow is not None and (status := self.flow.status(self.state)) is not None:
            return status
        if self.state in _ENDED or self.state in ("awaiting_approval", "paused"):
            return self.state  # type: ignore[return-value]
        if self.state in _RESUMABLE_FAILED:  # failed, and `resume` goes on from that step
            return "failed"
        return "running"

    @property
    def pending(self) -> list[ApprovalRequest]:
        """The calls waiting for a decision (none once the run has ended); a call that waits
        for its sub-agent's run is not one (the sub-agent's calls are: see `pending_tree`)."""
        if self.state in _ENDED:
            return []
        return [
            c.request() for c in self.batch if c.status == "awaiting" and c.child_run_id is None
        ]

    def replace_call(self, record: CallRecord) -> RunState:
        """The state with `record` in place of the current batch's call of the same id."""
        start = self.batch_start
        index = start + next(i for i, c in enumerate(self.batch) if c.call_id == record.call_id)
        calls = self.calls[:index] + (record,) + self.calls[index + 1 :]  # noqa: RUF005 (one copy)
        return self.evolve(calls=calls)
