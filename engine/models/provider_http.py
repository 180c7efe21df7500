"""The fast path's HTTP: a shape's request (`Template`) made again with another history, its
body encoded from parts encoded before; one transport of litellm's kind per event loop, shared
by the paths on it; `Recorder`, which records litellm's requests while a `recording` is open;
and `send`, which sends one request on the path's transport as its client would send it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import httpx

from loopstate.engine.model import ToolDefinition
from loopstate.engine.models.litellm_contract import http_handler
from loopstate.engine.models.provider_history import HISTORY


@dataclass(frozen=True)
class Template:
    """One request shape as litellm sent it: every call of the shape sends the same, but for
    the body's history fields (`messages`, Anthropic's `system`)."""

    request: httpx.Request
    body: dict[str, Any]
    tools: tuple[ToolDefinition, ...]
    compact: bool
    """Encoded as httpx and the OpenAI SDK encode JSON (else as litellm's `json.dumps`)."""

    def build(
        self, client: httpx.AsyncClient, fields: dict[str, Any], coded: tuple[bytes, ...] = ()
    ) -> tuple[httpx.Request, dict[str, Any]]:
        """The request of a call with the history `fields`, whose first messages are encoded
        already (`coded`, as `encoder(self.compact)` encodes them)."""
        body = {k: fields.get(k, v) for k, v in self.body.items()}
        content = encoded(body, compact=self.compact, coded=coded, fixed=self._fixed)
        # What `httpx.Request(content=...)` makes (the same headers, in the same order), at a
        # fifth of its cost: its body as a stream, read, and the length it would add.
        request = httpx.Request(
            "POST", self.request.url, headers=self._headers, stream=httpx.ByteStream(content),
            extensions=self.request.extensions,
        )  # fmt: skip
        request.headers["Content-Length"] = str(len(content))
        request.read()
        if client.cookies.jar:  # the pool's cookies as they are now
            client.cookies.set_cookie_header(request)
        return request, body

    @cached_property
    def _headers(self) -> httpx.Headers:
        return httpx.Headers(
            [(k, v) for k, v in self.request.headers.raw if k.lower() not in _PER_REQUEST]
        )

    @cached_property
    def _fixed(self) -> dict[str, bytes]:
        """The body's fields but the history's, each encoded with its name, as `encoded`
        joins them."""
        encode, (_, key) = encoder(self.compact), _separators(self.compact)
        return {k: encode(k) + key + encode(v) for k, v in self.body.items() if k not in HISTORY}


_PER_REQUEST = (b"content-length", b"cookie")  # set for each request anew


def encoder(compact: bool) -> Callable[[Any], bytes]:
    """How a value is encoded in a request body (compact: as httpx and the OpenAI SDK encode
    JSON; else as litellm's `json.dumps`)."""
    if compact:
        return lambda value: json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
    return lambda value: json.dumps(value).encode()


def _separators(compact: bool) -> tuple[bytes, bytes]:
    return (b",", b":") if compact else (b", ", b": ")


def encoded(
    body: dict[str, Any], *, compact: bool, coded: tuple[bytes, ...] = (),
    fixed: dict[str, bytes] | None = None,
) -> bytes:  # fmt: skip
    """`body` encoded as `encoder(compact)` encodes it whole, from parts encoded already: its
    `messages`' first ones (`coded`), and fields with their names (`fixed`). The same bytes."""
    encode = encoder(compact)
    if not coded and not fixed:
        return encode(body)
    fixed = fixed or {}
    item, key = _separators(compact)
    parts = []
    for name, value in body.items():
        if name in fixed:
            parts.append(fixed[name])
            continue
        if name == "messages":
            rest = map(encode, value[len(coded) :])
            part = b"[" + item.join((*coded, *rest)) + b"]"
        else:
            part = encode(value)
        parts.append(encode(name) + key + part)
    return b"{" + item.join(parts) + b"}"


_sent: contextvars.ContextVar[list[httpx.Request] | None] = contextvars.ContextVar(
    "loopstate_sent", default=None
)


# One transport of litellm's kind per live event loop (a pool belongs to its loop), shared by
# the fast paths on it; a closed loop's is dropped when another opens one (as `run_sync` does).
_TRANSPORTS: dict[asyncio.AbstractEventLoop, httpx.AsyncBaseTransport] = {}


def _transport() -> httpx.AsyncBaseTransport:
    loop = asyncio.get_running_loop()
    transport = _TRANSPORTS.get(loop)
    if transport is None:
        for closed in [old for old in _TRANSPORTS if old.is_closed()]:
            del _TRANSPORTS[closed]
        transport = _TRANSPORTS[loop] = (
            http_handler().create_async_transport() or httpx.AsyncHTTPTransport()
        )
    return transport


class Recorder(httpx.AsyncBaseTransport):
    """An httpx transport that sends on litellm's kind of transport (aiohttp's, unless
    litellm is told otherwise: a cancelled stream's connection is closed at once, as
    litellm's own are) and records what is sent while a `recording` is open in the sending
    task."""

    def __init__(self) -> None:
        self._inner = _transport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent = _sent.get()
        if sent is not None:
            sent.append(request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """The shared transport stays open for the loop's other fast paths."""


@contextmanager
def recording() -> Iterator[list[httpx.Request]]:
    sent: list[httpx.Request] = []
    token = _sent.set(sent)
    try:
        yield sent
    finally:
        _sent.reset(token)


async def send(client: httpx.AsyncClient, transport: Recorder, request: httpx.Request,
               *, stream: bool) -> httpx.Response:  # fmt: skip
    """`request` sent on `transport`, `client`'s own, as `client.send` sends it: that client
    (made with that transport, so no proxy of the environment; no auth, no event hooks) adds
    only its cookies (`Template.build` sets them; kept here from a reply that sets some) and a
    redirect's following (left to it: the request is sent again through it). Without the
    client's bookkeeping around each request (~0.3 ms a call)."""
    response = await transport.handle_async_request(request)
    response.request = request
    try:
        if response.has_redirect_location:
            await response.aclose()
            return await client.send(request, stream=stream)
        if not stream:
            await response.aread()
    except BaseException:
        await response.aclose()
        raise
    if "set-cookie" in response.headers:  # the SDK's client keeps them (litellm's blocks them)
        client.cookies.extract_cookies(response)
    return response
