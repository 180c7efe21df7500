"""The model port: one request in, one assistant turn out. A model never runs tools."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import SerializerFunctionWrapHandler, model_serializer

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


_LATER_COUNTERS = frozenset(
    {"cached_tokens", "cache_creation_tokens", "reasoning_tokens", "unpriced"}
)


class Usage(Frozen):
    """Tokens and cost of one model call, or summed over a run.

    `prompt_tokens` is everything the model read, cached or not (as litellm reports it);
    `cached_tokens` and `cache_creation_tokens` are the parts read from and written to the
    provider's prompt cache, `reasoning_tokens` the part of `completion_tokens` spent
    thinking. Each is 0 when the provider did not report it.

    Cost: `cost_usd` is the sum of the calls that could be priced; `unpriced` counts the calls
    litellm could not price (a model missing from its cost map). So one unpriced call is
    `cost_usd=None, unpriced=1`; a run's total is exact only when `unpriced == 0`, and None
    when no call was priced. A free call is `0.0`, never confused with unknown.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    unpriced: int = 0

    @model_serializer(mode="wrap")
    def _without_unreported(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Counters added after version 1 are left out while 0, so a run with nothing to
        # report stores and records exactly what it did before they existed.
        # An unknown cost stays null even under exclude_none: missing, it would load as 0.0.
        dumped: dict[str, Any] = {"cost_usd": None, **handler(self)}
        return {k: v for k, v in dumped.items() if k not in _LATER_COUNTERS or v}

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_known(self) -> bool:
        """Whether `cost_usd` is the whole cost (every call was priced)."""
        return self.unpriced == 0 and self.cost_usd is not None

    def __add__(self, other: Usage) -> Usage:
        # The empty sum (`Usage()`, a run before its first call) adds no cost of its own: a
        # run whose calls were all unpriced totals None, not 0.0.
        if self == _NOTHING or self.cost_usd is None:
            cost = other.cost_usd if other != _NOTHING else self.cost_usd
        elif other == _NOTHING or other.cost_usd is None:
            cost = self.cost_usd
        else:
            cost = self.cost_usd + other.cost_usd
        return Usage.trusted(  # sums of valid counts: nothing to validate, once per step
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=cost,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            unpriced=self.unpriced + other.unpriced,
        )


_NOTHING = Usage()


class ModelResponse(Frozen):
    """What one model call returned: the assistant's message and the call's usage."""

    message: AssistantMessage
    usage: Usage = Usage()
    model: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    """The provider's id of the reply (`chatcmpl-...`, Anthropic's `msg_...`), if known."""


@runtime_checkable
class Model(Protocol):
    """Anything that turns a `ModelRequest` into exactly one assistant turn."""

    @property
    def name(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...
