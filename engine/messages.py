"""Chat messages in the OpenAI chat-completions format, as frozen pydantic data.

`to_wire` (`model_dump(exclude_none=True)`) is the stored and recorded form, shared by the
store, the recorder and replay. An assistant turn also carries what its provider needs back
(thinking blocks, reasoning, provider fields, the provider's own call ids) with the `Origin`
that produced it; `loopstate.engine.models.wire` turns messages into what one provider is sent.
Every field added here has a None default, so a message stored or recorded before still
loads and digests the same.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from loopstate.engine.data import Frozen


class FunctionCall(Frozen):
    name: str
    arguments: str
    """The arguments exactly as the model produced them: a JSON text, possibly malformed."""


IdReplaced = Literal["empty", "repeated", "unwieldy"]
"""Why loopstate gave a call its own id: the provider sent none, sent one already used in
the run (or twice in a turn), or sent one too long or odd for a person to type."""


class ToolCall(Frozen):
    """A call the model asked for: the tool's name and its arguments as the model wrote them."""

    id: str
    """Unique within the run: what decisions, records, events, the store and the CLI use."""
    type: Literal["function"] = "function"
    function: FunctionCall
    provider_id: str | None = None
    """The id the provider sent, when loopstate replaced it (see `id_replaced`)."""
    id_replaced: IdReplaced | None = None
    provider_fields: dict[str, Any] | None = None
    """Keys the provider put on this call besides id/type/function (e.g. Gemini's
    `extra_content` with its thought signature), sent back only to the producing model."""

    @property
    def name(self) -> str:
        return self.function.name

    @property
    def wire_id(self) -> str:
        """The id its provider must see: its own when only too long for people (Gemini packs
        a signature into it), loopstate's when it was empty or repeated."""
        if self.id_replaced == "unwieldy" and self.provider_id:
            return self.provider_id
        return self.id


class ThinkingBlock(Frozen):
    """Anthropic extended thinking, kept unedited: the signature covers the text."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(Frozen):
    """Thinking the provider encrypted; only sent back, never shown."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


Thinking = Annotated[ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")]


class Origin(Frozen):
    """Which provider and model produced an assistant turn (litellm's provider name and the
    model name as configured, e.g. `anthropic` and `anthropic/claude-sonnet-4-5`)."""

    provider: str
    model: str


class SystemMessage(Frozen):
    """The instructions, first in the history."""

    role: Literal["system"] = "system"
    content: str


class UserMessage(Frozen):
    """What the user said."""

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(Frozen):
    """A model turn: text, tool calls, or both (with any reasoning the provider returned,
    kept to send back to the same model)."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    reasoning: str | None = None
    """The model's reasoning text, as the provider returned it (for people and events)."""
    reasoning_field: str | None = None
    """The wire name the provider used for `reasoning` (`reasoning_content` for DeepSeek,
    `reasoning` for Groq), to send it back under; None when the thinking blocks carry it."""
    thinking_blocks: tuple[Thinking, ...] | None = None
    """In the provider's order, unedited; sent back first in the assistant turn."""
    provider_fields: dict[str, Any] | None = None
    """Other provider-specific fields of the turn (citations, `extra_content`,
    `reasoning_details`, ...), as litellm reported them."""
    origin: Origin | None = None
    """Who produced this turn; provider data is sent back only to the same model."""

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return self.tool_calls or ()


class ToolMessage(Frozen):
    """A tool's result (or why the call did not run), answering `tool_call_id`."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]
"""One message of a run's history, told apart by its `role`."""


def to_wire(message: Message) -> dict[str, Any]:
    """The OpenAI chat-completions dict for one message."""
    return message.model_dump(mode="json", exclude_none=True)


def tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))
