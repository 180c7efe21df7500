"""`LiteLLMModel`: the model port over litellm. The only module that imports litellm.

litellm is imported on the first call, not with loopstate (the import takes seconds). Before
that import, `LITELLM_LOCAL_MODEL_COST_MAP=True` is set unless the user chose a value:
otherwise litellm fetches its cost map from GitHub on import (and offline retries for seconds).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from pydantic import ValidationError

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import AssistantMessage, FunctionCall, ToolCall, to_wire
from loopstate.engine.model import ModelRequest, ModelResponse, Usage
from loopstate.engine.sanitize import storable

# Set by `complete` from the request; a setting of the same name would contradict it. A stream
# would return chunks, not one reply.
_RESERVED = frozenset({"model", "messages", "tools", "tool_choice", "stream"})


def _import_litellm() -> Any:
    """litellm, imported on first use with quiet, offline defaults.

    If the application imported litellm itself, it has already chosen its cost map and
    debug settings, and they are left alone.
    """
    first = "litellm" not in sys.modules
    if first:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    if first:
        # Otherwise every mapped error first prints a "Give Feedback / Get Help" banner to
        # stdout; our ModelError already names the model and carries litellm's message.
        litellm.suppress_debug_info = True
    return litellm


class LiteLLMModel:
    """Any litellm model: `LiteLLMModel("openai/gpt-4o-mini", temperature=0)`.

    `settings` go to `litellm.acompletion` unchanged (`api_base`, `api_key`, `temperature`,
    `max_tokens`, `timeout`, `extra_headers`, ...). Each `complete` is exactly one
    `acompletion` call and never runs a tool. Retries are off unless you pass `num_retries`
    or `max_retries` (a retry is another paid model call, so it is your decision; litellm's
    OpenAI client would otherwise retry twice with backoff).
    """

    def __init__(self, name: str, **settings: Any) -> None:
        reserved = sorted(_RESERVED & settings.keys())
        if reserved:
            raise TypeError(f"LiteLLMModel sets {', '.join(reserved)} itself; do not pass it")
        self._name = name
        self.settings: dict[str, Any] = settings
        """Read by the recorder, which keeps credentials out of cassettes."""

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.settings.items() if "key" not in k and "header" not in k}
        return f"LiteLLMModel({self._name!r}, {shown})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        litellm = _import_litellm()
        try:
            raw = await litellm.acompletion(**self._arguments(request))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise ModelError(f"model {self._name} failed: {type(exc).__name__}: {exc}") from exc
        return _response(raw, self._name)

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = dict(self.settings)
        if "num_retries" not in arguments and "max_retries" not in arguments:
            arguments["num_retries"] = 0
        arguments["model"] = self._name
        arguments["messages"] = [to_wire(m) for m in request.messages]
        if request.tools:
            arguments["tools"] = [d.to_wire() for d in request.tools]
            arguments["tool_choice"] = request.tool_choice
        return arguments


def _response(raw: Any, name: str) -> ModelResponse:
    """litellm's `ModelResponse` (OpenAI-shaped whatever the provider) as ours."""
    try:
        choice = raw.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(
                id=c.id,
                function=FunctionCall(name=c.function.name, arguments=_raw_arguments(c.function)),
            )
            for c in (message.tool_calls or ())
        )
        usage = getattr(raw, "usage", None)
        response = ModelResponse(
            message=AssistantMessage(content=message.content, tool_calls=calls or None),
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                cost_usd=_cost(raw),
            ),
            model=getattr(raw, "model", None) or name,
            finish_reason=getattr(choice, "finish_reason", None),
        )
    except (AttributeError, IndexError, TypeError, ValidationError) as exc:
        raise ModelError(f"model {name} returned a reply loopstate cannot read: {exc}") from exc
    # the reply enters the run here: text that JSON can carry but UTF-8 cannot is replaced
    return storable(response)


def _raw_arguments(function: Any) -> str:
    arguments = function.arguments
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {})


def _cost(raw: Any) -> float:
    """The call's cost in USD as litellm priced it during the call; 0.0 when it could not.

    litellm computes it with the call's full context (provider, custom prices passed as
    settings) and stores None when the model is not in its cost map. Calling
    `completion_cost` again afterwards loses that context and raises for unknown models.
    """
    hidden = getattr(raw, "_hidden_params", None)  # a dict, or a HiddenParams model
    if isinstance(hidden, dict):
        cost = hidden.get("response_cost")
    else:
        cost = getattr(hidden, "response_cost", None)
    return float(cost) if isinstance(cost, int | float) else 0.0
