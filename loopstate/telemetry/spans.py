"""What OTelHooks keeps of one run while a process drives it, and the spans it writes alone
(a segment's ending, an approval with its explicit times)."""

from __future__ import annotations

from contextlib import suppress
from contextvars import Token
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from loopstate.engine.rule import Rule
from loopstate.engine.state import CallRecord
from loopstate.telemetry import names

FLOW_EVENTS = frozenset({"advance", "fail", "abort"})
"""A flow machine's events that leave a phase (its loop's are other names)."""
FINAL = frozenset({"done", "failed", "aborted"})


def ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


@dataclass
class Scope:
    """Where new spans of this process nest: a run's segment, or a tool call it runs (a
    sub-agent's run started there is that call's child)."""

    span: Span
    name: str | None = None
    """What a run started here is called: the tool's name, or the flow phase's."""
    call_id: str | None = None
    """The tool call, when the scope is one."""


@dataclass
class Segment:
    """One run as this process drives it: its `invoke_agent` span and what is open in it."""

    run_id: str
    span: Span
    child: bool
    recording: bool = True
    """False when its span records nothing (not sampled, or a no-op provider): then nothing
    is done for what happens inside it, so tracing that is off costs a dictionary lookup."""
    stored: Context | None = None
    """The trace context the run keeps (its first segment's): approvals hang under it."""
    phase: Span | None = None
    phase_name: str | None = None
    chat: Span | None = None
    chat_model: str = ""
    """The configured name of the model the open call asked."""
    tools: dict[str, Span] = field(default_factory=dict)
    tokens: list[tuple[Any, Token[Any]]] = field(default_factory=list)
    """What the segment made current (OTel's context, OTelHooks' scope), undone at its end."""

    def parent(self) -> Context:
        return trace.set_span_in_context(self.phase or self.span)

    def scope(self) -> Scope:
        return Scope(self.phase or self.span, self.phase_name)

    def enter_phase(self, tracer: Tracer, phase: str) -> None:
        self.leave_phase()
        self.phase_name = phase
        self.phase = tracer.start_span(
            f"{names.PHASE} {phase}",
            context=trace.set_span_in_context(self.span),
            attributes={names.PHASE: phase, names.RUN_ID: self.run_id},
        )

    def leave_phase(self) -> None:
        if self.phase is not None:
            self.phase.end()
        self.phase, self.phase_name = None, None

    def close(self, status: str, stop_reason: str | None, error: str | None) -> None:
        """End the segment and whatever is still open in it (a model call or a tool that did
        not finish: the run failed or stopped there)."""
        why = (error or status).split(":")[0]
        for span in (self.chat, *self.tools.values()):
            if span is not None:
                fail(span, why)
                span.end()
        self.chat, self.tools = None, {}
        self.leave_phase()
        self.span.set_attribute(names.STATUS, status)
        if stop_reason is not None:
            self.span.set_attribute(names.STOP_REASON, stop_reason)
        if status == "failed":
            fail(self.span, why, error)
        self.span.end()
        for var, token in reversed(self.tokens):
            detach(var, token)
        self.tokens = []


def fail(span: Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute(names.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def detach(var: Any, token: Token[Any]) -> None:
    """Undo what was made current: OTel's context (`var` None) or a context variable."""
    # set in another context (a task that has ended): nothing to restore
    with suppress(ValueError):
        otel_context.detach(token) if var is None else var.reset(token)


@dataclass(frozen=True)
class Approval:
    """A decision on a gated call, as the approval span records it."""

    run_id: str
    call_id: str
    tool: str
    outcome: str
    actor: str
    reason: str | None
    decided_at: float
    remembered: str | None = None


def write_approval(
    tracer: Tracer, approval: Approval, requested_at: float | None, parent: Context | None
) -> None:
    """The `loopstate.approval` span of one decision, from the request to the decision: its
    times are explicit (the run's clock), so it is written whole when the decision arrives,
    in whichever process that is. Without a known request time (a sub-agent's request made
    in another process) it is the decision's instant, with no `wait_s`."""
    start = approval.decided_at if requested_at is None else requested_at
    wait = max(0.0, approval.decided_at - start)
    attributes: dict[str, Any] = {
        names.RUN_ID: approval.run_id,
        names.TOOL_NAME: approval.tool,
        names.TOOL_CALL_ID: approval.call_id,
        "loopstate.approval.decision": approval.outcome,
        "loopstate.approval.actor": approval.actor,
    }
    if requested_at is not None:
        attributes["loopstate.approval.wait_s"] = wait
    if approval.reason:
        attributes["loopstate.approval.reason"] = approval.reason
    if approval.remembered:
        attributes["loopstate.approval.remembered"] = approval.remembered
    span = tracer.start_span(
        names.APPROVAL,
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=ns(start),
    )
    span.end(end_time=ns(start) + ns(wait))


def requested_at(transitions: Any, decided_at: float) -> float | None:
    """When the run last started waiting for a decision before `decided_at` (its audit trail
    says: the transition into `awaiting_approval`)."""
    times = [t.at for t in transitions if t.target == "awaiting_approval" and t.at <= decided_at]
    return max(times) if times else None


def approval_remembered(call: CallRecord) -> str | None:
    """What a remembered decision is for: the standing decision that decided this call
    (audited as `remembered:<tool or rule> (given by <who>)`), or the one this decision makes
    standing."""
    if call.decided_by and " (given by " in call.decided_by:
        return call.decided_by
    remember = getattr(call.decision, "remember", False)
    if isinstance(remember, Rule):
        return f"rule {remember.name}"
    return call.tool if remember is True else None
