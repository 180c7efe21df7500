"""`LiteLLMModel`: the model port over litellm.

litellm is imported by `_import_litellm` on the first call (the other modules here are handed
it, or import its parts after), not with loopstate (the import takes seconds). Before
that import, `LITELLM_LOCAL_MODEL_COST_MAP=True` is set unless the user chose a value:
otherwise litellm fetches its cost map from GitHub on import (and offline retries for seconds).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from loopstate.engine.errors import ModelError
from loopstate.engine.logs import get_logger
from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.litellm_errors import model_error, provider_failure
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.models.litellm_stream import stream_reply
from loopstate.engine.models.wire import provider_messages
from loopstate.engine.streaming import DeltaListener

if TYPE_CHECKING:
    from loopstate.engine.models.provider_path import ProviderPath

T = TypeVar("T")

# Set by `complete` from the request; a setting of the same name would contradict it. A stream
# would return chunks, not one reply.
_RESERVED = frozenset({"model", "messages", "tools", "tool_choice", "stream", "stream_options"})


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
    `max_tokens`, `timeout`, `extra_headers`, ...); `stall_s` is how long a streamed call may
    go without a chunk. Each `complete` (or `stream`) is exactly one
    `acompletion` call and never runs a tool. Retries are off unless you pass `num_retries`
    or `max_retries` (a retry is another paid model call, so it is your decision; litellm's
    OpenAI client would otherwise retry twice with backoff).

    A model of a provider litellm drives through its provider-config contract (OpenAI,
    Anthropic, Groq, DeepSeek, xAI, Mistral, OpenRouter: `provider_path.PROVIDERS`) with an
    explicit `api_key` repeats, after the first call of a request shape, only the per-call
    part of litellm's work (`provider_path.py`: the same request bytes, reply, cost and
    errors), streamed or not. `direct=False` sends every call through `litellm.acompletion`.
    """

    def __init__(
        self, name: str, *, stall_s: float = 60.0, direct: bool = True, **settings: Any
    ) -> None:
        reserved = sorted(_RESERVED & settings.keys())
        if reserved:
            raise TypeError(f"LiteLLMModel sets {', '.join(reserved)} itself; do not pass it")
        self._name = name
        self.stall_s = stall_s
        """How long a streamed call may go without a chunk before it fails (`ModelError`)."""
        self._origin: Origin | None = None
        # Per event loop: an httpx connection pool belongs to the loop that opened it.
        self._path: ProviderPath | None = None
        self._fast_on = direct
        """The fast path is used: `direct` asked for it and it has not failed (`_disable`)."""
        self.settings: dict[str, Any] = settings
        """Read by the recorder, which keeps credentials out of cassettes."""

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.settings.items() if "key" not in k and "header" not in k}
        return f"LiteLLMModel({self._name!r}, {shown})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._call(request, None)

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        """`complete`, streamed: deltas reported as they arrive, the same reply returned
        (with usage and cost). A truncated, dropped or stalled stream is a `ModelError`."""
        return await self._call(request, listener)

    async def _call(self, request: ModelRequest, listener: DeltaListener | None) -> ModelResponse:
        """The call through the fast path if it can make it, else through litellm (whose
        request of a shape the fast path keeps, to make the next call of that shape)."""
        litellm = _import_litellm()
        path = self._fast(self._fast_path)
        if path is not None:
            reply = await self._fast_call(path, request, listener)
            if reply is not None:
                return reply
            path = path if self._fast_on else None
        arguments = self._arguments(request, path)
        raw = None  # litellm's reply of a plain call
        with nullcontext([]) if path is None else path.capturing() as captured:
            if listener is not None:
                reply = await stream_reply(litellm, arguments, self.origin, listener, self.stall_s)
            else:
                try:
                    raw = await litellm.acompletion(**arguments)
                except Exception as exc:  # not CancelledError: a BaseException
                    raise model_error(exc, self._name) from exc
                reply = read_reply(raw, self.origin)
        if path is not None and self._fast_on:
            self._fast(lambda: path.remember(request, captured, raw))
        return reply

    def _fast(self, part: Callable[[], T]) -> T | None:
        """`part` of the fast path, or None: the fast path is off, or `part` failed in a way no
        provider causes (a changed litellm or SDK: `_disable`)."""
        if not self._fast_on:
            return None
        try:
            return part()
        except Exception as exc:
            self._disable(exc)
            return None

    async def _fast_call(
        self, path: ProviderPath, request: ModelRequest, listener: DeltaListener | None
    ) -> ModelResponse | None:
        """The fast path's reply; its provider's failure as a `ModelError`; None (the call
        goes through litellm) when the path cannot make the call or failed any other way."""
        try:
            if listener is None:
                return await path.complete(request)
            return await path.stream(request, listener, self.stall_s)
        except ModelError:
            raise
        except Exception as exc:
            if not provider_failure(exc):
                self._disable(exc)
                return None
            raise model_error(exc, self._name) from exc

    def _disable(self, exc: BaseException) -> None:
        """Every later call of this model goes through `litellm.acompletion`; said once."""
        self._fast_on = False
        self._path = None
        reason = f"{type(exc).__name__}: {exc}"
        get_logger().warning("fast_path_disabled", model=self._name, reason=reason)

    @property
    def origin(self) -> Origin:
        """The model as the producer of a turn: its litellm provider and configured name.
        A turn's thinking, reasoning and provider fields go back only to an equal origin."""
        if self._origin is None:
            self._origin = Origin(provider=self._provider(), model=self._name)
        return self._origin

    def _provider(self) -> str:
        chosen = self.settings.get("custom_llm_provider")
        if isinstance(chosen, str):
            return chosen
        try:
            return str(_import_litellm().get_llm_provider(self._name)[1])
        except Exception:  # litellm does not know it: the name's prefix is what it routes by
            return self._name.split("/", 1)[0]

    def _fast_path(self) -> ProviderPath | None:
        """The fast path of this model on this event loop, or None: not eligible."""
        from loopstate.engine.models.provider_path import PROVIDERS, eligible, provider_path

        if self._path is not None and self._path.usable():
            return self._path
        self._path = None
        litellm, provider = _import_litellm(), self.origin.provider
        key = self.settings.get("api_key")
        if provider in PROVIDERS and isinstance(key, str) and eligible(litellm, self.settings):
            self._path = provider_path(litellm, self.origin, self.settings)
        return self._path

    def _arguments(self, request: ModelRequest, path: ProviderPath | None) -> dict[str, Any]:
        arguments: dict[str, Any] = dict(self.settings)
        if "num_retries" not in arguments and "max_retries" not in arguments:
            arguments["num_retries"] = 0
        arguments["model"] = self._name
        if path is not None:  # litellm posts through the fast path's client (recorded)
            arguments["client"] = path.handler
        arguments["messages"] = provider_messages(request.messages, self.origin)
        if request.tools:
            arguments["tools"] = [d.to_wire() for d in request.tools]
            arguments["tool_choice"] = request.tool_choice
            # litellm routes every call with tools through its MCP gateway, which imports the
            # whole `mcp` package (client and server: starlette, uvicorn, ...) and may run MCP
            # tools itself. loopstate's tools are functions it runs itself, never the adapter:
            # skipping the gateway keeps that true and makes litellm's `mcp` extra needless.
            arguments["_skip_mcp_handler"] = True
        return arguments
