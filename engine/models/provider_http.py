"""The fast path's HTTP: one transport of litellm's kind per event loop, shared by the paths on
it; `Recorder`, which records litellm's requests while a `recording` is open; and `send`, which
sends one request on the path's transport as its client would send it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from loopstate.engine.models.litellm_contract import http_handler

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
