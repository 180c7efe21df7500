"""What one provider is sent of a history: each turn's provider data only to the model that
produced it, and every call under the id that provider knows it by.

A history may hold turns from several models (a flow switches model between phases, a run is
resumed with another one). Thinking signatures, reasoning fields and provider extras are
accepted by the model that produced them and rejected or misread by others (Groq refuses an
unknown `reasoning_content`; OpenAI refuses unknown keys; a signature is only valid for its
model), so a turn from another `Origin` is sent as plain text and tool calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loopstate.engine.messages import AssistantMessage, Message, Origin, ToolCall, ToolMessage
from loopstate.engine.messages import to_wire as stored_form

# litellm rebuilds requests for these providers from its own `provider_specific_fields` key;
# for OpenAI-compatible ones it sends every key of a message verbatim, so extras go back
# as the top-level keys the provider sent.
_NESTED_FIELDS = frozenset({"anthropic", "bedrock", "vertex_ai", "gemini"})


def provider_messages(
    messages: Iterable[Message], target: Origin, wire_ids: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The chat-completions dicts litellm is given for `target`. `wire_ids` (filled in): the
    wire ids of the calls of the messages before these, when only a history's tail is sent."""
    wire_ids = {} if wire_ids is None else wire_ids
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            out.append(_assistant(message, target, wire_ids))
        elif isinstance(message, ToolMessage):
            call_id = wire_ids.get(message.tool_call_id, message.tool_call_id)
            out.append({"role": "tool", "tool_call_id": call_id, "content": message.content})
        else:
            out.append(stored_form(message))
    return out


def _assistant(
    message: AssistantMessage, target: Origin, wire_ids: dict[str, str]
) -> dict[str, Any]:
    own = message.origin == target
    wire: dict[str, Any] = {"role": "assistant"}
    if message.content is not None:
        wire["content"] = message.content
    if message.tool_calls is not None:
        wire["tool_calls"] = [_call(c, own, wire_ids) for c in message.tool_calls]
    if not own:
        return wire
    if message.thinking_blocks:
        wire["thinking_blocks"] = [
            b.model_dump(mode="json", exclude_none=True) for b in message.thinking_blocks
        ]
    if message.reasoning is not None and message.reasoning_field:
        wire[message.reasoning_field] = message.reasoning
    if message.provider_fields:
        if target.provider in _NESTED_FIELDS:
            wire["provider_specific_fields"] = dict(message.provider_fields)
        else:
            wire |= {k: v for k, v in message.provider_fields.items() if k not in wire}
    return wire


def _call(call: ToolCall, own: bool, wire_ids: dict[str, str]) -> dict[str, Any]:
    # Another provider never saw the original id: it gets loopstate's short unique one.
    wire_id = call.wire_id if own else call.id
    wire_ids[call.id] = wire_id
    wire: dict[str, Any] = {
        "id": wire_id,
        "type": call.type,
        "function": {"name": call.function.name, "arguments": call.function.arguments},
    }
    if own and call.provider_fields:
        wire |= {k: v for k, v in call.provider_fields.items() if k not in wire}
    return wire
