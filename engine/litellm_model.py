"""`LiteLLMModel`: the model port over litellm. The only module that imports litellm.

litellm is imported on the first call, not with loopstate (it takes seconds). Before that
import, `LITELLM_LOCAL_MODEL_COST_MAP=True` is set unless the user chose a value: otherwise
litellm fetches its cost map from the network on import (and offline retries for seconds).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import AssistantMessage, FunctionCall, ToolCall, to_wire
from loopstate.engine.model import ModelRequest, ModelResponse, Usage

_litellm: Any = None


def _import_litellm() -> Any:
    global _litellm  # one cached module reference; importing is idempotent anyway
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        # No "Give Feedback / Get Help" banners on errors: our errors say what happened.
        litellm.suppress_debug_info = True
        _litellm = litellm
    return _litellm


class LiteLLMModel:
    """Any litellm model: `LiteLLMModel("openai/gpt-4o-mini", temperature=0)`.

    `settings` go to `litellm.acompletion` unchanged (`api_base`, `api_key`, `temperature`,
    `max_tokens`, `timeout`, `extra_headers`, ...). Each `complete` is exactly one
    `acompletion` call; retries are off unless you pass `num_retries` (a retry is another
    model call, so it is your decision).
    """

    def __init__(self, name: str, **settings: Any) -> None:
        self._name = name
        self.settings = settings

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.settings.items() if "key" not in k and "header" not in k}
        return f"LiteLLMModel({self._name!r}, {shown})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        litellm = _import_litellm()
        kwargs: dict[str, Any] = {"num_retries": 0, **self.settings}
        kwargs["model"] = self._name
        kwargs["messages"] = [to_wire(m) for m in request.messages]
        if request.tools:
            kwargs["tools"] = [d.to_wire() for d in request.tools]
            kwargs["tool_choice"] = request.tool_choice
        try:
            raw = await litellm.acompletion(**kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise ModelError(f"model {self._name} failed: {type(exc).__name__}: {exc}") from exc
        return _response(raw, self._name, litellm)


def _response(raw: Any, name: str, litellm: Any) -> ModelResponse:
    try:
        choice = raw.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(
                id=c.id,
                function=FunctionCall(name=c.function.name, arguments=_arguments(c.function)),
            )
            for c in (message.tool_calls or ())
        )
    except (AttributeError, IndexError, TypeError) as exc:
        raise ModelError(f"model {name} returned a reply loopstate cannot read: {exc}") from exc
    usage = getattr(raw, "usage", None)
    return ModelResponse(
        message=AssistantMessage(content=message.content, tool_calls=calls or None),
        usage=Usage(
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cost_usd=_cost(raw, litellm),
        ),
        model=getattr(raw, "model", None) or name,
        finish_reason=getattr(choice, "finish_reason", None),
    )


def _arguments(function: Any) -> str:
    arguments = function.arguments
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {})


def _cost(raw: Any, litellm: Any) -> float:
    """The call's cost from litellm's local price map; 0.0 for models it does not price."""
    try:
        return float(litellm.completion_cost(completion_response=raw) or 0.0)
    except Exception:  # unknown model or provider: cost is unknown, not an error
        return 0.0
