"""`OTelHooks`: every run a trace, after the OpenTelemetry GenAI semantic conventions.

    invoke_agent {agent}            a run, one span per process that drives it (`segment`)
      ├─ loopstate.transition         span events: every move of the machine
      ├─ loopstate.phase {phase}      a flow's phase (its calls nest in it)
      ├─ chat {model}                 each model call (CLIENT): provider, models, tokens
      ├─ execute_tool {tool}          each tool call: call id, outcome
      │    └─ invoke_agent {tool}     a sub-agent's run, child of the call that delegated
      └─ loopstate.approval           request → decision, with explicit times

One trace across processes: the run keeps its first segment's context (`run_metadata`); a
resume anywhere starts its segment as that context's child (a parent, not a link: the run is
one trace however long it waits) and links the span that was current there (a worker's, a
request's), so both traces lead to each other. An approval's span is written when its
decision reaches the run, with its start at the request's time (from the run's audit trail
when the request was made in another process).

Content (messages, tool arguments and results) is recorded only when opted in:
`capture_content=True`, or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, TracerProvider

from loopstate.engine.events import (
    Event,
    ModelRequested,
    ModelResponded,
    RunFinished,
    RunStarted,
    ToolApproval,
    ToolFinished,
    ToolStarted,
    TransitionEvent,
)
from loopstate.engine.hooks import Hooks
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.state import CallRecord, RunState
from loopstate.telemetry import names
from loopstate.telemetry.carry import carrier_of, stored_context
from loopstate.telemetry.spans import (
    FINAL,
    FLOW_EVENTS,
    Approval,
    Scope,
    Segment,
    approval_remembered,
    fail,
    requested_at,
    write_approval,
)

_BUFFERED = 64
"""Events kept for a run whose segment is not open yet (a resume announces its decisions and
transitions before `on_run_start`); a run that never opens one keeps no more than this."""


class OTelHooks(Hooks):
    """Hooks that trace runs with OpenTelemetry (needs `loopstate[otel]`; configure the SDK,
    its exporter and sampling yourself, as with any instrumented library).

    `agent_name` names the runs' spans (default: the run's machine, e.g. `agent`; a
    sub-agent's run is named after its tool). `tracer_provider` defaults to the global one.
    `capture_content` records prompts, replies, tool arguments and results as span
    attributes; default: the `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` setting,
    off unless it says `true`. Give the same instance to an agent and its sub-agents."""

    def __init__(
        self,
        *,
        agent_name: str | None = None,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | None = None,
    ) -> None:
        from loopstate import __version__

        self.agent_name = agent_name
        self.capture = names.capture_from_env() if capture_content is None else capture_content
        self.tracer = trace.get_tracer("loopstate", __version__, tracer_provider=tracer_provider)
        self._segments: dict[str, Segment] = {}
        self._buffered: dict[str, list[Event]] = {}
        self._requested: dict[tuple[str, str], float] = {}
        self._decided: dict[str, list[Approval]] = {}
        self._carried: dict[str, dict[str, str]] = {}
        self._last: object = None
        # Per instance: two OTelHooks (an agent's and its sub-agent's) keep apart.
        self._scope: ContextVar[Scope | None] = ContextVar(f"otel_scope_{id(self)}", default=None)
        self._deciding: ContextVar[ToolApproval | None] = ContextVar(
            f"otel_deciding_{id(self)}", default=None
        )
        self._chat: ContextVar[Span | None] = ContextVar(f"otel_chat_{id(self)}", default=None)

    # -- a run's segments --------------------------------------------------------------------

    async def on_run_start(self, run: RunState) -> None:
        opened = self._segments.get(run.run_id)
        if opened is not None:  # opened as a sub-agent's run (its events came first)
            self._write_decided(run.run_id, run.transitions, opened.parent())
            return
        stored = stored_context(run.metadata)
        ambient = trace.get_current_span().get_span_context()
        links = [Link(ambient)] if stored is not None and ambient.is_valid else []
        segment = self._open(run.run_id, run.machine, stored, links, child=False)
        segment.stored = stored
        self._carried[run.run_id] = carrier_of(segment.span) if stored is None else {}
        segment.tokens.append((None, otel_context.attach(trace.set_span_in_context(segment.span))))
        if run.flow is not None:
            segment.enter_phase(self.tracer, run.flow.phase)
        segment.tokens.append((self._scope, self._scope.set(segment.scope())))
        if not segment.recording:  # not sampled, or no SDK: nothing inside it is either
            self._buffered.pop(run.run_id, None)
            self._decided.pop(run.run_id, None)
            return
        for event in self._buffered.pop(run.run_id, []):
            self._handle(segment, event)
        self._write_decided(run.run_id, run.transitions, stored)

    async def run_metadata(self, run: RunState) -> Mapping[str, Any] | None:
        carrier = self._carried.pop(run.run_id, None)
        return {names.TRACE_KEY: carrier} if carrier else None

    async def on_run_end(self, run: RunState) -> None:
        self._close(run.run_id, run.status, run.stop_reason, run.error)

    def _open(
        self, run_id: str, machine: str, parent: Context | None, links: list[Link], *, child: bool
    ) -> Segment:
        started = next(
            (e for e in self._buffered.get(run_id, ()) if isinstance(e, RunStarted)), None
        )
        scope = self._scope.get()
        name = (scope.name if child and scope else None) or self.agent_name or machine
        attributes: dict[str, Any] = {
            names.OPERATION: "invoke_agent",
            names.AGENT_NAME: name,
            names.CONVERSATION: run_id,
            names.RUN_ID: run_id,
            names.SEGMENT: "start" if started is not None else "resume",
        }
        if started is not None and started.model:
            provider, model = names.provider_and_model(started.model.split(",")[0])
            attributes |= {names.PROVIDER: provider, names.REQUEST_MODEL: model}
        span = self.tracer.start_span(
            f"invoke_agent {name}", context=parent, kind=SpanKind.INTERNAL,
            attributes=attributes, links=links,
        )  # fmt: skip
        segment = Segment(run_id, span, child, recording=span.is_recording())
        self._segments[run_id] = segment
        return segment

    def _write_decided(self, run_id: str, transitions: Any, parent: Context | None) -> None:
        """The approvals of decisions that reached the run before its segment opened (a
        resume applies them first), timed from the request this process saw or the run's
        audit trail."""
        for approval in self._decided.pop(run_id, []):
            asked = self._requested.pop((run_id, approval.call_id), None)
            asked = asked or requested_at(transitions, approval.decided_at)
            write_approval(self.tracer, approval, asked, parent)

    def _close(self, run_id: str, status: str, stop: str | None, error: str | None) -> None:
        segment = self._segments.pop(run_id, None)
        if segment is not None:
            if segment.recording:  # a sub-agent's decisions, their requests made elsewhere
                self._write_decided(run_id, (), segment.parent())
            segment.close(status, stop, error)
        self._buffered.pop(run_id, None)
        for key in [k for k in self._requested if k[0] == run_id]:  # its audit trail has them
            del self._requested[key]

    # -- events ------------------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        if event is self._last:  # the same event, heard again through a sub-agent's observer
            return
        self._last = event
        segment = self._segments.get(event.run_id)
        if segment is None:
            segment = self._child_segment(event)
        if segment is None:
            if event.kind == "tool_approval" and event.outcome != "auto":
                self._deciding.set(event)
            else:
                self._buffer(event)
            return
        if segment.recording:
            self._handle(segment, event)
        elif event.kind in ("run_finished", "run_suspended"):
            self._close(event.run_id, "", None, None)  # nothing inside it is recorded

    def _handle(self, segment: Segment, event: Event) -> None:
        handle = _HANDLERS.get(event.kind)
        if handle is not None:
            handle(self, segment, event)

    def _child_segment(self, event: Event) -> Segment | None:
        """A run started or resumed while one of ours works here is its sub-agent's (or a
        run its tool started): its segment opens as a child of what is current."""
        scope = self._scope.get()
        if scope is None or event.kind not in ("run_started", "run_resumed"):
            return None
        if isinstance(event, RunStarted):
            self._buffer(event)
        machine = event.machine if isinstance(event, RunStarted) else "agent"
        parent = trace.set_span_in_context(scope.span)
        return self._open(event.run_id, machine, parent, [], child=True)

    def _buffer(self, event: Event) -> None:
        kept = self._buffered.setdefault(event.run_id, [])
        if len(kept) < _BUFFERED:
            kept.append(event)

    def _transition(self, segment: Segment, event: TransitionEvent) -> None:
        segment.span.add_event(names.TRANSITION, names.transition_attributes(event))
        if event.target == "aborted" and event.reason == "cancelled":  # no run_finished follows
            self._close(event.run_id, "aborted", "cancelled", None)
            return
        if event.event in FLOW_EVENTS and event.source == segment.phase_name:
            segment.leave_phase()
            if event.target not in FINAL:
                segment.enter_phase(self.tracer, event.target)
            self._scope.set(segment.scope())  # an agent phase's run nests in its phase

    def _model_request(self, segment: Segment, event: ModelRequested) -> None:
        provider, model = names.provider_and_model(event.model)
        segment.chat_model = event.model
        segment.chat = span = self.tracer.start_span(
            f"chat {model}",
            context=segment.parent(),
            kind=SpanKind.CLIENT,
            attributes={
                names.OPERATION: "chat",
                names.PROVIDER: provider,
                names.REQUEST_MODEL: model,
                names.CONVERSATION: event.run_id,
            },
        )
        self._chat.set(span)  # the same task's before_model and after_model add to it

    def _model_response(self, segment: Segment, event: ModelResponded) -> None:
        span, segment.chat = segment.chat, None
        if span is None:
            return
        span.set_attributes(names.usage_attributes(event.usage))
        # The provider's model name as it answered; the configured one (without the
        # provider's prefix) when it did not say.
        answered = event.model
        if answered == segment.chat_model:
            answered = names.provider_and_model(answered)[1]
        span.set_attribute(names.RESPONSE_MODEL, answered)
        span.end()

    def _approval_requested(self, segment: Segment, event: Any) -> None:
        self._requested[(event.run_id, event.call_id)] = event.at

    def _tool_approval(self, segment: Segment, event: ToolApproval) -> None:
        if event.outcome != "auto":  # an auto-approved call waited for nobody
            self._deciding.set(event)

    def _tool_started(self, segment: Segment, event: ToolStarted) -> None:
        span = self.tracer.start_span(
            f"execute_tool {event.tool}",
            context=segment.parent(),
            kind=SpanKind.INTERNAL,
            attributes={
                names.OPERATION: "execute_tool",
                names.TOOL_NAME: event.tool,
                names.TOOL_CALL_ID: event.call_id,
                names.TOOL_TYPE: "function",
                names.RUN_ID: event.run_id,
            },
        )
        segment.tools[event.call_id] = span
        # Current while the call runs (in its own task when a batch runs concurrently): a
        # sub-agent's run nests under it, and log lines of the tool carry its ids.
        otel_context.attach(trace.set_span_in_context(span))
        self._scope.set(Scope(span, event.tool, event.call_id))

    def _tool_finished(self, segment: Segment, event: ToolFinished) -> None:
        span = segment.tools.pop(event.call_id, None)
        if span is None:
            return
        span.set_attribute(names.TOOL_OUTCOME, event.status)
        if event.status in ("failed", "interrupted"):
            fail(span, f"tool_{event.status}")
        span.end()
        # Back to the run's scope (the call's task ends here, or the run goes on in it).
        otel_context.attach(segment.parent())
        self._scope.set(segment.scope())

    def _run_stopped(self, segment: Segment, event: Any) -> None:
        if isinstance(event, RunFinished):
            self._close(event.run_id, event.status, event.stop_reason, event.error)
        else:
            self._close(event.run_id, "suspended", None, None)

    def _refused(self, segment: Segment, event: Any) -> None:
        segment.span.add_event(
            "loopstate.decision_refused",
            {names.TOOL_CALL_ID: event.call_id, "loopstate.actor": event.actor},
        )

    # -- what only the hooks carry -----------------------------------------------------------

    async def on_approval_decided(self, call: CallRecord) -> None:
        event = self._deciding.get()
        if event is None or event.call_id != call.call_id or call.decided_at is None:
            return
        self._deciding.set(None)
        approval = Approval(
            run_id=event.run_id,
            call_id=call.call_id,
            tool=call.tool,
            outcome=event.outcome,
            actor=event.actor,
            reason=event.reason,
            decided_at=call.decided_at,
            remembered=approval_remembered(call),
        )
        segment = self._segments.get(event.run_id)
        if segment is None:  # a resume applies decisions before its segment opens
            self._decided.setdefault(event.run_id, []).append(approval)
            return
        if not segment.recording:
            return
        asked = self._requested.pop((event.run_id, call.call_id), None)
        parent = trace.set_span_in_context(segment.span)
        write_approval(self.tracer, approval, asked or call.decided_at, parent)

    async def before_model(self, request: ModelRequest) -> None:
        span = self._current_chat()
        if span is not None and self.capture:
            messages = [m.model_dump(mode="json", exclude_none=True) for m in request.messages]
            span.set_attribute(names.INPUT_MESSAGES, json.dumps(messages))

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> None:
        span = self._current_chat()
        if span is None:
            return
        if response.finish_reason:
            span.set_attribute(names.FINISH_REASONS, (response.finish_reason,))
        if response.response_id:  # the provider's reply id, where the model port knows it
            span.set_attribute(names.RESPONSE_ID, response.response_id)
        if self.capture:
            output = response.message.model_dump(mode="json", exclude_none=True)
            span.set_attribute(names.OUTPUT_MESSAGES, json.dumps([output]))

    async def before_tool(self, call: CallRecord) -> None:
        span = self._current_tool(call.call_id)
        if span is not None and self.capture:
            span.set_attribute(names.TOOL_ARGUMENTS, call.raw_arguments)

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        span = self._current_tool(call.call_id)
        if span is not None and self.capture:
            span.set_attribute(names.TOOL_RESULT, result)
        return None

    def _current_chat(self) -> Span | None:
        """The model call this task is making."""
        span = self._chat.get()
        return span if span is not None and span.is_recording() else None

    def _current_tool(self, call_id: str) -> Span | None:
        scope = self._scope.get()
        return scope.span if scope is not None and scope.call_id == call_id else None


_HANDLERS: dict[str, Any] = {
    "transition": OTelHooks._transition,
    "model_request": OTelHooks._model_request,
    "model_response": OTelHooks._model_response,
    "approval_requested": OTelHooks._approval_requested,
    "tool_approval": OTelHooks._tool_approval,
    "tool_started": OTelHooks._tool_started,
    "tool_finished": OTelHooks._tool_finished,
    "run_suspended": OTelHooks._run_stopped,
    "run_finished": OTelHooks._run_stopped,
    "decision_refused": OTelHooks._refused,
}
