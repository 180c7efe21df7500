"""The model port: one request in, one assistant turn out. A model never runs tools."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from loopstate.engine.data import Frozen
from loopstate.engine.messages import AssistantMessage, Message

ToolChoice = Literal["auto", "required", "none"]


class ToolDefinition(Frozen):
    """What the model is told about a tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ModelRequest(Frozen):
    """Everything one model step sees: the whole history and the active tools."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice = "auto"
    step: int = 0


class Usage(Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class ModelResponse(Frozen):
    message: AssistantMessage
    usage: Usage = Usage()
    model: str | None = None
    finish_reason: str | None = None


@runtime_checkable
class Model(Protocol):
    """Anything that turns a `ModelRequest` into exactly one assistant turn."""

    @property
    def name(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...
