"""OpenTelemetry traces of runs (the `otel` extra: `pip install 'loopstate[otel]'`).

    from loopstate.telemetry import OTelHooks, add_trace_context
    agent = Agent(model, tools, hooks=[OTelHooks()])

`OTelHooks` writes spans after the GenAI semantic conventions (`invoke_agent`, `chat`,
`execute_tool`) plus the machine's own (`loopstate.transition` events, `loopstate.approval`,
`loopstate.phase`), one trace per run across every process that drives it.
`add_trace_context` is a structlog processor that puts `trace_id`/`span_id` on log lines;
`temporal_interceptors` is temporalio's tracing interceptor for a Temporal client. Nothing
here is imported by `import loopstate`: without these hooks, no run pays for telemetry.
"""

try:
    import opentelemetry.trace  # noqa: F401 (checked first: its absence gets one clear line)
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        "loopstate.telemetry needs OpenTelemetry's API: pip install 'loopstate[otel]'",
        name=exc.name,
    ) from None

from loopstate.telemetry.carry import add_trace_context, temporal_interceptors
from loopstate.telemetry.hooks import OTelHooks

__all__ = ["OTelHooks", "add_trace_context", "temporal_interceptors"]
