"""The fast path on litellm's provider-config contract, for the OpenAI-compatible providers
litellm drives through its base HTTP handler (`PROVIDERS`: Groq, DeepSeek, xAI, Mistral,
OpenRouter).

litellm's base handler (`llm_http_handler.py`) drives such a provider with its config object
(`ProviderConfigManager.get_provider_chat_config`): `validate_environment` (headers),
`get_complete_url`, `transform_request` (the body, posted as `json.dumps`), then
`transform_response`. `litellm.acompletion` adds ~5 ms of CPU a call around that, and its
transform walks the whole history each call. Here:

- the model owns one HTTP client: litellm's `AsyncHTTPHandler` over a transport of ours
  (`Recorder`, an httpx transport: httpx's public API for it), handed to `acompletion` as its
  `client`, so litellm's first call of a request shape is recorded as it went out (URL,
  headers, timeout, body) - with every provider-specific default litellm applied;
- a later call of the same shape (tools, tool choice) sends that request again with only
  `messages` changed: the messages sent last time for the history's earlier part, and the
  config's `transform_request` of the messages the history gained (per message for plain
  text and tool messages, `_plain`), encoded as litellm encodes them (`json.dumps`): the
  same bytes on the wire;
- the reply is read by the config's `transform_response`, then `litellm_reply.read_reply`,
  priced by `litellm.completion_cost` (checked on the first call: a shape whose cost differs
  from litellm's own is not kept);
- an error status is a `ModelError` built from the status, the provider's error body and its
  retry-after; a timeout or a failed connection the same as litellm's (`timeout`,
  `connection`). Anything else (a changed contract) goes back to `LiteLLMModel`, which turns
  the fast path off and calls `acompletion`.

Streaming, and providers that sign requests or resolve credentials per call (Bedrock,
Vertex, SageMaker, Azure AD: `SIGNED`), stay on `acompletion`.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Message, Origin
from loopstate.engine.model import ModelRequest, ModelResponse, ToolDefinition
from loopstate.engine.models.history_cache import HistoryCache
from loopstate.engine.models.litellm_contract import http_handler, response_cost
from loopstate.engine.models.litellm_errors import retry_after
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.models.wire import provider_messages

PROVIDERS = frozenset({"groq", "deepseek", "xai", "mistral", "openrouter"})
SIGNED = frozenset({"bedrock", "vertex_ai", "vertex_ai_beta", "sagemaker", "azure", "azure_ai"})
"""Stay on `acompletion`: their requests are signed or their credentials resolved per call."""

# Settings whose litellm mapping is a fixed function of the setting (captured once).
_SETTINGS = frozenset(
    {
        "api_base", "api_key", "organization", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "seed", "stop", "timeout", "extra_headers", "extra_body",
        "presence_penalty", "frequency_penalty", "parallel_tool_calls", "user",
        "reasoning_effort", "response_format", "logit_bias", "num_retries",
    }
)  # fmt: skip
# litellm globals that add per-call work the thin path does not repeat.
_EMPTY_GLOBALS = (
    "callbacks", "success_callback", "failure_callback", "_async_success_callback",
    "_async_failure_callback", "input_callback", "service_callback", "headers", "cache",
    "drop_params", "model_alias_map", "add_function_to_prompt", "openai_system_messages_first",
)  # fmt: skip


def eligible(litellm: Any, settings: dict[str, Any]) -> bool:
    """The settings and litellm's globals leave nothing per call the thin path skips."""
    if not settings.keys() <= _SETTINGS or settings.get("num_retries", 0) != 0:
        return False
    return not any(getattr(litellm, name, None) for name in _EMPTY_GLOBALS)


_sent: contextvars.ContextVar[list[httpx.Request] | None] = contextvars.ContextVar(
    "loopstate_sent", default=None
)


class Recorder(httpx.AsyncBaseTransport):
    """An httpx transport that sends on a real one and records what is sent while a
    `recording` is open in the sending task."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent = _sent.get()
        if sent is not None:
            sent.append(request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextmanager
def recording() -> Iterator[list[httpx.Request]]:
    sent: list[httpx.Request] = []
    token = _sent.set(sent)
    try:
        yield sent
    finally:
        _sent.reset(token)


@dataclass(frozen=True)
class Template:
    """One request shape as litellm sent it: every call of the shape sends the same, but for
    the body's `messages`."""

    request: httpx.Request
    body: dict[str, Any]
    tools: tuple[ToolDefinition, ...]

    def send(self, client: httpx.AsyncClient, messages: list[Any]) -> Any:
        body = {k: messages if k == "messages" else v for k, v in self.body.items()}
        content = json.dumps(body).encode()
        headers = [(k, v) for k, v in self.request.headers.raw if k.lower() != b"content-length"]
        request = httpx.Request(
            "POST", self.request.url, headers=headers, content=content,
            extensions=dict(self.request.extensions),
        )  # fmt: skip
        return client.send(request)


@dataclass(frozen=True)
class _Sent:
    """A history as last sent: its messages, their call ids on the wire, the dicts sent."""

    source: tuple[Message, ...]
    wire_ids: dict[str, str]
    sent: list[Any]


class _NoLogging:
    """What `transform_response` logs to (litellm's logging object): kept nowhere."""

    def __init__(self) -> None:
        self.model_call_details: dict[str, Any] = {}

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        pass


def _plain(messages: list[dict[str, Any]]) -> bool:
    """Text and tool messages without a developer role: transformed message by message."""
    return all(
        m.get("role") != "developer" and isinstance(m.get("content"), str | None) for m in messages
    )


def _shape(request: ModelRequest) -> tuple[bool, str]:
    return bool(request.tools), request.tool_choice if request.tools else ""


class ProviderPath:
    """The fast path of one `LiteLLMModel` of a provider in `PROVIDERS`."""

    def __init__(self, litellm: Any, name: str, origin: Origin, settings: dict[str, Any]) -> None:
        self._litellm = litellm
        self._origin = origin
        self.loop = asyncio.get_running_loop()
        """An HTTP client's pool belongs to the event loop that opened it."""
        self._name = name
        self._provider = origin.provider
        self._settings = settings
        self.handler = http_handler(Recorder())
        """Handed to `acompletion` as its `client`: litellm's handler over our transport."""
        self._config: Any = None
        self._templates: dict[tuple[bool, str], Template] = {}
        self._histories = HistoryCache(_Sent((), {}, []))

    def is_closed(self) -> bool:
        return bool(self.handler.client.is_closed)

    def capturing(self) -> AbstractContextManager[list[httpx.Request]]:
        return recording()

    def remember(self, request: ModelRequest, captured: list[Any], raw: Any) -> None:
        """Keep litellm's request for `request` as its shape's template, if the reply is
        priced here as litellm priced it."""
        if len(captured) != 1 or not eligible(self._litellm, self._settings):
            return
        sent: httpx.Request = captured[0]
        body = json.loads(sent.content)
        wire_ids: dict[str, str] = {}
        wire = provider_messages(request.messages, self._origin, wire_ids)
        if not isinstance(body, dict) or len(body.get("messages") or ()) != len(wire):
            return
        if not _plain(wire) or self._cost(raw) != response_cost(raw):
            return
        self._templates[_shape(request)] = Template(sent, body, request.tools)
        self._histories.keep(_Sent(request.messages, wire_ids, list(body["messages"])))

    async def complete(
        self, request: ModelRequest, origin: Origin, name: str
    ) -> ModelResponse | None:
        """The call's reply, or None: it must go through litellm."""
        template = self._templates.get(_shape(request))
        if template is None or template.tools != request.tools:
            return None
        if not eligible(self._litellm, self._settings):
            return None
        messages = self._messages(request, origin, template.body["model"])
        if messages is None:
            return None
        try:
            response = await template.send(self.handler.client, messages)
        except httpx.TimeoutException as exc:
            message = f"model {self._name} failed: Timeout: {exc}"
            raise ModelError(message, error_type="timeout") from exc
        except httpx.TransportError as exc:
            raise ModelError(
                f"model {self._name} failed: {type(exc).__name__}: {exc}",
                error_type="connection",
            ) from exc
        if response.status_code >= 400:
            raise _status_error(self._name, response)
        return self._read(response, template, messages, origin)

    def _messages(self, request: ModelRequest, origin: Origin, model: str) -> list[Any] | None:
        last = self._histories.last(request.messages)
        wire_ids = dict(last.wire_ids)
        new = provider_messages(request.messages[len(last.source) :], origin, wire_ids)
        if not _plain(new):
            return None
        done = self._contract().transform_request(
            model=model, messages=new, optional_params={}, litellm_params={}, headers={}
        )["messages"]
        messages = [*last.sent, *done]
        self._histories.keep(_Sent(request.messages, wire_ids, messages))
        return messages

    def _read(
        self, response: httpx.Response, template: Template, messages: list[Any], origin: Origin
    ) -> ModelResponse:
        try:
            reply = json.loads(response.content)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
            raise ModelError(  # a proxy's page, or JSON that is no completion
                f"model {self._name} failed: the reply is no completion: {response.text[:200]!r}",
                error_type="bad_response",
            )
        body = template.body
        optional = {k: v for k, v in body.items() if k not in ("model", "messages")}
        raw = self._contract().transform_response(
            model=body["model"], raw_response=response,
            model_response=self._litellm.ModelResponse(), logging_obj=_NoLogging(),
            request_data={**body, "messages": messages},
            messages=messages, optional_params=optional, litellm_params={}, encoding=None,
            api_key=self._settings.get("api_key"), json_mode=False,
        )  # fmt: skip
        return read_reply(raw, origin, cost=self._cost(raw))

    def _cost(self, raw: Any) -> float | None:
        try:
            cost = self._litellm.completion_cost(
                completion_response=raw, model=self._name, custom_llm_provider=self._provider
            )
        except Exception:  # litellm's own pricing turns a failure into no cost too
            return None
        return float(cost) if isinstance(cost, int | float) else None

    def _contract(self) -> Any:
        if self._config is None:
            litellm = self._litellm
            self._config = litellm.ProviderConfigManager.get_provider_chat_config(
                model=self._name.split("/", 1)[-1], provider=litellm.LlmProviders(self._provider)
            )
        return self._config


_PATHS: weakref.WeakValueDictionary[tuple[str, str], ProviderPath] = weakref.WeakValueDictionary()


def provider_path(
    litellm: Any, name: str, origin: Origin, settings: dict[str, Any]
) -> ProviderPath:
    """The fast path of models of this name and these settings on this event loop: shared by
    them (its client's pool and its templates; a service may make a model per request), held
    only while one of them holds it."""
    key = (name, repr(sorted(settings.items(), key=lambda item: item[0])))
    path = _PATHS.get(key)
    if path is None or path.loop is not asyncio.get_running_loop() or path.is_closed():
        path = _PATHS[key] = ProviderPath(litellm, name, origin, settings)
    return path


def _status_error(model: str, response: httpx.Response) -> ModelError:
    """The provider's error: its status, its error body's type and message, retry-after."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else body if isinstance(body, dict) else {}
    kind = error.get("code") or error.get("type")
    message = error.get("message")
    return ModelError(
        f"model {model} failed: HTTP {response.status_code}: {message or response.text[:200]}",
        status=response.status_code,
        error_type=kind if isinstance(kind, str) and kind else None,
        provider_message=message if isinstance(message, str) and message else None,
        retry_after=retry_after(response.headers),
    )
