"""The door every request passes before any work is done for it (an ASGI middleware).

- The token first: a request to the API (`/api/...`) or its description (`/openapi.json`,
  `/docs`) without the service's token is answered 401 before a byte of its body is read.
- The body's size: a declared `Content-Length` over `max_body` is answered 413 at once; a
  body sent without one (chunked) is counted as it arrives and answered 413 the moment it
  passes the limit, the rest never read.
- The body's type: a body that is not JSON is answered 415.

Every answer is `application/problem+json` (`problems.Problem`). The pages (`/ui/`) check
their token themselves (they take it once in `?token=`).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loopstate.service.auth import Guard
from loopstate.service.problems import Problem

MAX_BODY = 1024 * 1024
"""The default limit of a request's body: 1 MiB."""
_GUARDED = ("/api/", "/openapi.json", "/docs", "/redoc")
_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class _TooLarge(HTTPException):
    """The body passed the limit while it was read: an HTTPException, so that what reads the
    body (FastAPI) lets it through, and the app's handler answers it as a problem."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


class Door:
    """Wraps the app: `guard` holds the token; `max_body` bounds every request's body."""

    def __init__(self, app: ASGIApp, guard: Guard, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.guard = guard
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self.check(Request(scope))
        except Problem as refused:
            await refused.response()(scope, receive, send)
            return
        started, size = False, 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            size += len(message.get("body", b""))
            if size > self.max_body:
                raise _TooLarge(self.max_body)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except _TooLarge:
            if not started:
                await self.too_large().response()(scope, receive, send)

    def check(self, request: Request) -> None:
        """Refuse what can be refused from the request line and headers alone."""
        if request.url.path.startswith(_GUARDED):
            self.guard.authenticate(request)
        length = request.headers.get("content-length")
        if length is not None:
            if not (length.isascii() and length.isdigit()) or len(length) > 18:
                raise Problem(400, "Content-Length must be a number of bytes")
            if int(length) > self.max_body:
                raise self.too_large()
        if request.method in _WITH_BODY and _has_body(request):
            kind = request.headers.get("content-type", "application/json").split(";")[0]
            kind = kind.strip().lower()
            if kind != "application/json" and not kind.endswith("+json"):
                raise Problem(415, "send the body as JSON (Content-Type: application/json)")

    def too_large(self) -> Problem:
        return Problem(413, _too_large(self.max_body))


def _too_large(limit: int) -> str:
    return f"the body is larger than this service takes ({limit} bytes)"


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return "transfer-encoding" in request.headers or (length is not None and length != "0")
