"""The names loopstate's spans use: the OpenTelemetry GenAI semantic conventions (the
`gen_ai.*` registry of semantic-conventions 1.37+, as opentelemetry-semantic-conventions
0.66b2 spells them) and loopstate's own `loopstate.*` names for what they do not cover (the
machine's transitions, approvals, flow phases).

The conventions are plain strings here: the `opentelemetry-semantic-conventions` package is
the SDK's dependency, not the API's, and its GenAI module is marked incubating.
"""

from __future__ import annotations

import os
from typing import Any

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

RUN_ID = "loopstate.run_id"
SEGMENT = "loopstate.segment"
"""`start` for a run's first span, `resume` for each later one (a run is one span per process
that drove it, all in one trace)."""
STATUS = "loopstate.status"
STOP_REASON = "loopstate.stop_reason"
COST = "loopstate.cost_usd"
TOOL_OUTCOME = "loopstate.tool.outcome"
TRANSITION = "loopstate.transition"
APPROVAL = "loopstate.approval"
PHASE = "loopstate.phase"

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' content-capture switch (`true`, or `span_only` / `span_and_event`)."""
_CAPTURE_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})

TRACE_KEY = "trace_context"
"""Where a run's `metadata` keeps its trace context (W3C `traceparent`, `tracestate`)."""

# litellm's provider prefixes whose well-known `gen_ai.provider.name` differs.
_PROVIDERS = {
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}


def capture_from_env() -> bool:
    """Whether the environment opts in to message and argument content (off by default)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in _CAPTURE_ON


def provider_and_model(name: str) -> tuple[str, str]:
    """`gen_ai.provider.name` and `gen_ai.request.model` of a litellm model name:
    `anthropic/claude-sonnet-4-5` → (`anthropic`, `claude-sonnet-4-5`)."""
    prefix, slash, model = name.partition("/")
    if not slash:
        return "unknown", name
    return _PROVIDERS.get(prefix, prefix), model


def transition_attributes(event: Any) -> dict[str, Any]:
    """The attributes of a `loopstate.transition` span event (from a `TransitionEvent`)."""
    attributes: dict[str, Any] = {
        "loopstate.transition.seq": event.seq,
        "loopstate.transition.from": event.source,
        "loopstate.transition.to": event.target,
        "loopstate.transition.event": event.event,
    }
    if event.actor is not None:
        attributes["loopstate.transition.actor"] = event.actor
    if event.reason is not None:
        attributes["loopstate.transition.reason"] = event.reason
    return attributes


def usage_attributes(usage: Any) -> dict[str, Any]:
    """Token counts (and cost) of one model call, as the conventions name them."""
    attributes: dict[str, Any] = {
        INPUT_TOKENS: usage.prompt_tokens,
        OUTPUT_TOKENS: usage.completion_tokens,
    }
    optional = (
        (CACHE_READ_TOKENS, usage.cached_tokens),
        (CACHE_CREATION_TOKENS, usage.cache_creation_tokens),
        (REASONING_TOKENS, usage.reasoning_tokens),
    )
    attributes.update({k: v for k, v in optional if v})
    if usage.cost_usd is not None and usage.unpriced == 0:
        attributes[COST] = usage.cost_usd
    return attributes
