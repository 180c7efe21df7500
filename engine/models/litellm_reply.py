"""litellm's reply (OpenAI-shaped whatever the provider) as loopstate's `ModelResponse`,
keeping what the provider needs back: thinking blocks, reasoning, provider fields, usage
details. Duck-typed: it reads litellm's objects without importing litellm."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import AssistantMessage, FunctionCall, Origin, Thinking, ToolCall
from loopstate.engine.model import ModelResponse, Usage
from loopstate.engine.models.litellm_contract import response_cost

_THINKING: TypeAdapter[tuple[Thinking, ...]] = TypeAdapter(tuple[Thinking, ...])
# Carried by typed fields of the message, or by a call's own fields.
_TYPED = frozenset({"thinking_blocks", "reasoning_content", "reasoning"})
_CALL_KEYS = frozenset({"id", "type", "function", "index"})
# Message keys some OpenAI-compatible providers need back, outside provider_specific_fields.
_TOP_LEVEL_EXTRAS = ("reasoning_details",)


_KEPT = object()


def provider_id(raw: Any, origin: Origin) -> str | None:
    """The provider's id of reply `raw` (litellm's), where litellm keeps it: OpenAI-compatible
    replies keep theirs (`chatcmpl-...`); litellm gives an Anthropic reply an id of its own
    (a random `chatcmpl-...`: the `msg_...` is lost), so that one is None. The fast path reads
    the provider's id from the reply itself, Anthropic's included."""
    if origin.provider == "anthropic":
        return None
    found = getattr(raw, "id", None)
    return found if isinstance(found, str) and found else None


def read_reply(
    raw: Any, origin: Origin, cost: float | object | None = _KEPT, response_id: object = _KEPT
) -> ModelResponse:
    """`raw` (litellm's reply) as a `ModelResponse`; its cost as litellm kept it, or `cost`;
    its id as `provider_id` finds it, or `response_id`."""
    try:
        choice = raw.choices[0]
        return ModelResponse(
            message=assistant_message(choice.message, origin),
            usage=usage_of(raw, cost),
            model=getattr(raw, "model", None) or origin.model,
            finish_reason=getattr(choice, "finish_reason", None),
            response_id=provider_id(raw, origin) if response_id is _KEPT else response_id,
        )
    except (AttributeError, IndexError, TypeError, ValidationError) as exc:
        raise ModelError(
            f"model {origin.model} returned a reply loopstate cannot read: {exc}",
            error_type="unreadable_reply",
        ) from exc


def assistant_message(message: Any, origin: Origin) -> AssistantMessage:
    thinking = _THINKING.validate_python(getattr(message, "thinking_blocks", None) or ())
    reasoning, field = _reasoning(message, bool(thinking))
    calls = tuple(_call(c) for c in (message.tool_calls or ()))
    fields = _provider_fields(message)
    return AssistantMessage(
        content=message.content,
        tool_calls=calls or None,
        reasoning=reasoning,
        reasoning_field=field,
        thinking_blocks=thinking or None,
        provider_fields=fields,
        origin=origin,
    )


def _reasoning(message: Any, has_thinking: bool) -> tuple[str | None, str | None]:
    """The reasoning text and the wire name to send it back under (None: the thinking
    blocks carry it, as for Anthropic, whose text litellm copies into reasoning_content)."""
    for name in ("reasoning_content", "reasoning"):
        text = getattr(message, name, None)
        if isinstance(text, str):
            return text, None if has_thinking else name
    return None, None


def _provider_fields(message: Any) -> dict[str, Any] | None:
    specific = getattr(message, "provider_specific_fields", None)
    fields = {k: v for k, v in (specific or {}).items() if v is not None and k not in _TYPED}
    for name in _TOP_LEVEL_EXTRAS:
        value = getattr(message, name, None)
        if value is not None:
            fields[name] = value
    return fields or None


def _call(call: Any) -> ToolCall:
    dumped = call.model_dump() if hasattr(call, "model_dump") else {}
    extras = {k: v for k, v in dumped.items() if k not in _CALL_KEYS and v is not None}
    name, arguments = call.function.name, call.function.arguments
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    function = FunctionCall(name=name, arguments=arguments)
    return ToolCall(id=call.id or "", function=function, provider_fields=extras or None)


def usage_of(raw: Any, cost: float | object | None = _KEPT) -> Usage:
    usage = getattr(raw, "usage", None)
    prompt = getattr(usage, "prompt_tokens_details", None)
    completion = getattr(usage, "completion_tokens_details", None)
    priced = response_cost(raw) if cost is _KEPT else cost
    cost_usd = priced if isinstance(priced, float) else None
    return Usage(
        prompt_tokens=_count(usage, "prompt_tokens"),
        completion_tokens=_count(usage, "completion_tokens"),
        cached_tokens=_count(prompt, "cached_tokens") or _count(usage, "cache_read_input_tokens"),
        cache_creation_tokens=_count(usage, "cache_creation_input_tokens")
        or _count(prompt, "cache_creation_tokens"),
        reasoning_tokens=_count(completion, "reasoning_tokens"),
        cost_usd=cost_usd,
        unpriced=1 if cost_usd is None else 0,
    )


def _count(source: Any, name: str) -> int:
    value = getattr(source, name, None)
    return value if isinstance(value, int) else 0
