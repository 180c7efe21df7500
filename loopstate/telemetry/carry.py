"""A run's trace context kept with the run, log lines joined to traces, Temporal's interceptor.

The context is W3C trace context (`traceparent`, `tracestate`), written into the run's
`metadata` under `trace_context` by OTelHooks' `run_metadata`: the store keeps it in the run's
header like any metadata, so no store or schema changes, and a run saved before telemetry
(without it) loads as before and simply starts a trace at its next resume.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from loopstate.telemetry.names import TRACE_KEY

_PROPAGATOR = TraceContextTextMapPropagator()


def carrier_of(span: Span) -> dict[str, str]:
    """`span`'s context as W3C headers (what a run keeps to be continued elsewhere)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def stored_context(metadata: Mapping[str, Any]) -> Context | None:
    """The trace context a run's metadata keeps, or None (never kept, or unreadable: a run
    must never fail for its telemetry)."""
    carrier = metadata.get(TRACE_KEY)
    if not isinstance(carrier, Mapping) or not isinstance(carrier.get("traceparent"), str):
        return None
    context = _PROPAGATOR.extract({k: v for k, v in carrier.items() if isinstance(v, str)})
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def add_trace_context(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: `trace_id` and `span_id` (hex, as OTLP and the W3C header spell
    them) on every line logged while a span is active. loopstate never configures logging:
    add it to your own chain, e.g.
    `structlog.configure(processors=[add_trace_context, ..., JSONRenderer()])`."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event_dict.setdefault("trace_id", format(context.trace_id, "032x"))
        event_dict.setdefault("span_id", format(context.span_id, "016x"))
    return event_dict


def temporal_interceptors(tracer_provider: TracerProvider | None = None) -> list[Any]:
    """The OpenTelemetry interceptor of temporalio, for a Temporal client (and so its workers):
    a workflow's start, its updates (decisions) and its activities (model calls, tools) join
    the caller's trace. Pass as `TemporalRuns.connect(..., interceptors=...)`."""
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [
        TracingInterceptor(trace.get_tracer("loopstate.temporal", tracer_provider=tracer_provider))
    ]
