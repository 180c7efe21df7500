"""Chat messages in the OpenAI chat-completions format, as frozen pydantic data.

`model_dump(exclude_none=True)` of any message is exactly what goes on the wire, so the
litellm adapter, the store and the recorder all share one representation.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from loopstate.engine.data import Frozen


class FunctionCall(Frozen):
    name: str
    arguments: str
    """The arguments exactly as the model produced them: a JSON text, possibly malformed."""


class ToolCall(Frozen):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall

    @property
    def name(self) -> str:
        return self.function.name


class SystemMessage(Frozen):
    role: Literal["system"] = "system"
    content: str


class UserMessage(Frozen):
    role: Literal["user"] = "user"
    content: str


class AssistantMessage(Frozen):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return self.tool_calls or ()


class ToolMessage(Frozen):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]


def to_wire(message: Message) -> dict[str, Any]:
    """The OpenAI chat-completions dict for one message."""
    return message.model_dump(mode="json", exclude_none=True)


def tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))
