"""The OpenAI client litellm is handed for OpenAI-compatible models: the same request on the
wire, without the OpenAI SDK's per-call walk of the whole history.

The SDK runs every `chat.completions.create` payload through `_utils/_transform.py`, which
walks each message and tool with typing introspection: ~0.25 ms of CPU per message on every
call, so O(n) per call and O(n²) per run, blocking the event loop meanwhile (a known upstream
problem: anthropic-sdk-python #1195, openai-python #3616). For plain JSON data that walk is the
identity, so `messages` and `tools` go through `extra_body` instead (the workaround of #1195):
the transform sees empty placeholders, and the SDK's merge (`{**body, **extra_body}`) puts the
real values back in the placeholders' places, so the body's keys, order and bytes are unchanged.
litellm >= 1.108 skips the walk itself (it posts its body with `client.post`); the client
then only records what was posted, for the thin path's template.

The client is built the way litellm builds its own (the same SDK, defaults and headers) over
the HTTP pool of litellm's own cached client for the same settings, and reused for every call
of one `LiteLLMModel` on one event loop; it is used only when the
provider is `openai` and `api_base` and `api_key` are explicit settings, so nothing litellm
would resolve from the environment or a custom client is bypassed. Everything else, and every
other provider, goes through litellm unchanged.
"""

from __future__ import annotations

import contextvars
import json
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeAlias

from openai import APIConnectionError, APITimeoutError, AsyncOpenAI, OpenAIError
from openai import __version__ as openai_version
from openai._base_client import status_exceptions, timeout_exceptions  # type: ignore[attr-defined]
from openai._legacy_response import LegacyAPIResponse
from openai._utils._json import openapi_dumps
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

# Sent through `extra_body`: the payload that grows with the history.
_MOVED = ("messages", "tools")
# Headers httpx derives per request, from the body and the pool's cookie jar.
_PER_REQUEST = frozenset({b"content-length", b"cookie"})
# With any of these litellm builds a client differently (Azure AD, workload identity, ...).
_OWN_CLIENT = frozenset(
    {"client", "api_version", "azure_ad_token", "litellm_params", "shared_session"}
)


Request: TypeAlias = Any
"""An HTTP request as the SDK's client builds it: `httpx.Request` (the SDK >= 3 types it as
its `httpx2` fork's, but builds it with the HTTP client it is given: litellm's httpx pool)."""

_capture: contextvars.ContextVar[list[tuple[str, Any]] | None] = contextvars.ContextVar(
    "loopstate_openai_capture", default=None
)


def record(kind: str, value: Any) -> None:
    """What litellm hands the client (`params`), what the SDK sends (`request`) and how it
    reads the reply (`reading`): kept while a capture is open (`capturing`)."""
    captured = _capture.get()
    if captured is not None:
        captured.append((kind, value))


_created: contextvars.ContextVar[bool] = contextvars.ContextVar("loopstate_created", default=False)


@contextmanager
def capturing() -> Iterator[list[tuple[str, Any]]]:
    captured: list[tuple[str, Any]] = []
    token = _capture.set(captured)
    try:
        yield captured
    finally:
        _capture.reset(token)


@dataclass(frozen=True)
class Wire:
    """One request as the SDK built it (headers, URL, timeout, body key order) and what its
    reply is read with: every call of the same shape sends the same but for its body."""

    request: Request
    body: tuple[tuple[str, Any], ...]
    reading: tuple[Any, Any, Any]  # cast_to, stream_cls, options

    @classmethod
    def of(cls, request: Request, reading: tuple[Any, Any, Any]) -> Wire | None:
        body = json.loads(request.content)
        if not isinstance(body, dict):
            return None
        return cls(request, tuple(body.items()), reading)

    def build(self, body: dict[str, Any], cookies: Any) -> Request:
        """The same request with `body` (the SDK's own JSON encoding) and the pool's cookies
        as they are now (a server may have set some since), both put where httpx's
        `build_request` puts them: Cookie after the headers, then Content-Length."""
        headers = [(k, v) for k, v in self.request.headers.raw if k.lower() not in _PER_REQUEST]
        return type(self.request)(
            self.request.method, self.request.url, headers=headers, cookies=cookies or None,
            content=openapi_dumps(body), extensions=dict(self.request.extensions),
        )  # fmt: skip


async def send(client: DirectPayloadClient, wire: Wire, body: dict[str, Any]) -> Any:
    """The SDK's `request` for one attempt (retries are off): sent on the client's own pool,
    failures raised as the SDK raises them, the reply as `with_raw_response` returns it."""
    response = await sent(client, wire, body, stream=False)
    cast_to, stream_cls, options = wire.reading
    return LegacyAPIResponse(
        raw=response, client=client, cast_to=cast_to, stream=False, stream_cls=stream_cls,
        options=options, retries_taken=0,
    )  # fmt: skip


def parsed(raw: Any, body: Any = None) -> Any:
    """`raw.parse()` of a chat completion (a `LegacyAPIResponse`): the reply as the SDK's
    model. A JSON reply (`body`: its `completion_json`, if read already) that validates
    strictly is the model the SDK's `construct` makes of the same data, without its Python
    walk of the model's types (~10x faster); anything else (a reply strict validation
    refuses, another type, a stream) is the SDK's own."""
    body = completion_json(raw) if body is None else body
    if body is not None:
        try:
            return ChatCompletion.model_validate(body, strict=True)
        except ValidationError:
            pass
    return raw.parse()


def completion_json(raw: Any) -> Any:
    """The JSON of `raw` (a `LegacyAPIResponse`) if it is a chat completion the SDK reads as
    JSON, else None."""
    content_type = raw.http_response.headers.get("content-type", "*").split(";")[0]
    if raw._cast_to is not ChatCompletion or raw._stream or not content_type.endswith("json"):
        return None
    try:
        return raw.http_response.json()
    except ValueError:
        return None


async def sent(
    client: DirectPayloadClient, wire: Wire, body: dict[str, Any], *, stream: bool
) -> Any:
    """One attempt of the SDK's request on the client's own pool: the httpx response once its
    status is a success; failures raised as the SDK raises them (timeout, connection, status)."""
    request = wire.build(body, client._client.cookies)
    try:
        response = await client._send_request(request, stream=stream)
    except timeout_exceptions() as err:
        raise APITimeoutError(request=request) from err
    except OpenAIError:
        raise
    except Exception as err:
        raise APIConnectionError(request=request) from err
    try:
        response.raise_for_status()
    except status_exceptions() as err:
        if not err.response.is_closed:
            await err.response.aread()
        raise client._make_status_error_from_response(err.response) from None
    return response


class _Completions(AsyncCompletions):
    async def create(self, **params: Any) -> Any:  # forwards every argument, typed by the SDK
        record("params", dict(params))  # what litellm built: the thin path's template
        moved = {key: params[key] for key in _MOVED if key in params}
        for key in moved:
            params[key] = []  # a placeholder keeps the key's place in the body
        params["extra_body"] = {**moved, **(params.get("extra_body") or {})}
        token = _created.set(True)  # recorded: the SDK's own `post` below is not litellm's
        try:
            return await super().create(**params)
        finally:
            _created.reset(token)


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class DirectPayloadClient(AsyncOpenAI):
    """`AsyncOpenAI` whose chat completions send messages and tools untransformed."""

    async def post(self, path: str, **arguments: Any) -> Any:  # forwards every argument
        body, options = arguments.get("body"), arguments.get("options") or {}
        if path == "/chat/completions" and isinstance(body, dict) and not _created.get():
            # litellm >= 1.108 posts the body itself (no SDK walk): what it built, as `create`
            # would have been given it (the timeout among the parameters)
            record("params", {**body, "timeout": options.get("timeout")})
        return await super().post(path, **arguments)

    async def request(  # forwards every argument
        self, cast_to: Any, options: Any, *, stream: bool = False, stream_cls: Any = None
    ) -> Any:
        record("reading", (cast_to, stream_cls, options))
        return await super().request(cast_to, options, stream=stream, stream_cls=stream_cls)

    def _build_request(self, options: Any, *, retries_taken: int = 0) -> Request:
        request: Request = super()._build_request(options, retries_taken=retries_taken)
        record("request", request)
        return request

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)


def direct_payload_client(
    litellm: Any, provider: str, settings: dict[str, Any]
) -> DirectPayloadClient | None:
    """A client for `settings`, or None when litellm should build its own."""
    api_base, api_key = settings.get("api_base"), settings.get("api_key")
    if provider != "openai" or not isinstance(api_base, str) or not isinstance(api_key, str):
        return None
    if _OWN_CLIENT & settings.keys():
        return None
    try:
        # litellm's own cached client for these settings: its HTTP pool (litellm's transport,
        # which litellm owns and closes) is shared, so this client holds nothing to close.
        own = litellm.main.openai_chat_completions.get_openai_client(
            is_async=True, api_key=api_key, api_base=api_base, max_retries=0,
            organization=settings.get("organization"),
        )  # fmt: skip
        pool = own._client
    except (AttributeError, TypeError):  # another litellm inside: its own path, unchanged
        return None
    # One client per pool, shared by the live models of the same settings (building one is
    # ~0.3 ms, and a service may make a model per request). Held weakly: a client kept past
    # its models would outlive litellm's pool, to be torn down with the interpreter.
    key = (api_base, api_key, settings.get("organization"))
    client = _CLIENTS.get(key)
    if client is None or client._client is not pool:
        client = _CLIENTS[key] = DirectPayloadClient(
            api_key=api_key,
            base_url=api_base,
            http_client=pool,
            organization=settings.get("organization"),
            max_retries=0,  # litellm sets the call's own retries on the client it is given
            # The SDK names a client by its class: this one says what litellm's own says.
            default_headers={"User-Agent": f"{AsyncOpenAI.__name__}/Python {openai_version}"},
        )
    return client


_CLIENTS: weakref.WeakValueDictionary[tuple[str, str, Any], DirectPayloadClient] = (
    weakref.WeakValueDictionary()
)
