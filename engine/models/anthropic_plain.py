"""A plain Anthropic reply read straight from its JSON: the `ModelResponse` litellm's
`AnthropicConfig.transform_response` and `litellm_reply.read_reply` make of it, priced at the
shape's per-token rates (`openai_plain.Linear`), without litellm's reply object or its cost
calculator (~0.5 ms of CPU a call).

Plain: a message of text and tool-use blocks only (no thinking, server tools, citations or
results), ending its turn, calling tools or cut at the token limit; usage of input and output
tokens with nothing read from or written to the cache, at the standard tier; no proxy's price.
litellm then joins the texts (None if empty), turns each tool use into a call whose arguments
are `json.dumps` of its input, maps the stop reason (`end_turn` -> `stop`, `tool_use` ->
`tool_calls`, `max_tokens` -> `length`) and counts the tokens, and nothing else:
tests/test_anthropic_plain_reply.py compares both readings over real HTTP, and checks that
the rest takes litellm's. `counts` alone decides whether a reply read by litellm (one with
more keys or blocks of other fields, say) may still be priced at the rates.
"""

from __future__ import annotations

import json
from typing import Any

from loopstate.engine.messages import AssistantMessage, FunctionCall, Origin, ToolCall
from loopstate.engine.model import ModelResponse
from loopstate.engine.models.openai_plain import COST_HEADER, Linear, counts_nothing, priced

_TOP = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)
_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_TEXT = frozenset({"type", "text"})
_TOOL_USE = frozenset({"type", "id", "name", "input"})
_USAGE = frozenset(
    {"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
     "cache_creation", "service_tier"}
)  # fmt: skip


def json_body(response: Any) -> Any:
    """An httpx response's JSON, or None."""
    try:
        return response.json()
    except ValueError:
        return None


def counts(body: Any, headers: Any) -> tuple[int, int] | None:
    """The input and output tokens of a reply litellm prices by them alone: text and tool
    uses, nothing cached or written to the cache, the standard tier, no proxy's price."""
    if not isinstance(body, dict) or COST_HEADER in headers:
        return None
    content, usage = body.get("content"), body.get("usage")
    if not isinstance(content, list) or not isinstance(usage, dict) or not usage.keys() <= _USAGE:
        return None
    if not all(isinstance(b, dict) and b.get("type") in ("text", "tool_use") for b in content):
        return None
    prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    if type(prompt) is not int or type(completion) is not int or min(prompt, completion) < 0:
        return None
    cached = usage.get("cache_creation_input_tokens"), usage.get("cache_read_input_tokens")
    if any(cached) or not counts_nothing(usage.get("cache_creation")):
        return None
    return (prompt, completion) if usage.get("service_tier") in (None, "standard") else None


def plain_reply(
    body: Any, headers: Any, linear: Linear, origin: Origin, model_cost: dict[str, Any]
) -> ModelResponse | None:
    """`body` read and priced as litellm would, or None: not plain."""
    tokens = counts(body, headers)
    if tokens is None or not body.keys() <= _TOP or body.get("type") != "message":
        return None
    model, finish = body.get("model"), _FINISH.get(body.get("stop_reason"))
    if body.get("role") != "assistant" or not isinstance(model, str) or finish is None:
        return None
    if model != linear.model or linear.tier is not None or sum(tokens) > linear.bound:
        return None
    message = _message(body["content"], origin)
    if message is None or not linear.holds(model_cost):
        return None
    return priced(message, tokens, linear, model, finish)


def _message(content: list[dict[str, Any]], origin: Origin) -> AssistantMessage | None:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if block.keys() == _TEXT and type(block["text"]) is str:
            texts.append(block["text"])
        elif block.keys() == _TOOL_USE and block["type"] == "tool_use":
            call_id, name, given = block["id"], block["name"], block["input"]
            if type(call_id) is not str or not call_id or type(name) is not str:
                return None
            if not isinstance(given, dict):
                return None
            arguments = FunctionCall(name=name, arguments=json.dumps(given))
            calls.append(ToolCall(id=call_id, function=arguments, provider_fields=None))
        else:
            return None
    return AssistantMessage(
        content="".join(texts) or None, tool_calls=tuple(calls) or None, reasoning=None,
        reasoning_field=None, thinking_blocks=None, provider_fields=None, origin=origin,
    )  # fmt: skip
