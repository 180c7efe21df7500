"""Who is asking, and may they: the token (Bearer header, or the cookie the pages get), the
cross-origin refusal of state-changing requests, and the `authorize` hook whose answer is the
`actor` in the audit trail."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Literal

from fastapi import Request

from loopstate.service.problems import Problem

Action = Literal["read", "start", "decide", "abort", "message"]
Authorize = Callable[[Request, Action, str | None], Awaitable[str | None]]
"""`authorize(request, action, run_id)` → the acting identity, or None to refuse (403).
`run_id` is None for actions on no single run (listing, starting)."""

COOKIE = "loopstate_token"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


async def anyone(request: Request, action: Action, run_id: str | None) -> str | None:
    """The default policy: whoever holds the token may do everything, as `http`."""
    return "http"


class Guard:
    def __init__(self, token: str | None, authorize: Authorize) -> None:
        self.token = token
        self.authorize = authorize

    async def identity(self, request: Request, action: Action, run_id: str | None) -> str:
        """The actor for `action`, or a `Problem`: 401 without the token, 403 for a
        state-changing request from another origin or one `authorize` refuses."""
        self.authenticate(request)
        if request.method not in _SAFE:
            same_origin(request)
        who = await self.authorize(request, action, run_id)
        if not who:
            raise Problem(403, f"not allowed to {action}")
        return who

    def authenticate(self, request: Request) -> None:
        if self.token is None:
            return
        self.check_token(bearer(request) or request.cookies.get(COOKIE) or "")

    def check_token(self, given: str) -> None:
        """Refuse (401) a token that is not the service's."""
        if self.token is None:
            return
        if not hmac.compare_digest(given.encode(errors="replace"), self.token.encode()):
            raise Problem(401, "a valid token is required (Authorization: Bearer <token>)")


def bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def same_origin(request: Request) -> None:
    """Refuse a request a page of another site sent (its `Origin`, or `Sec-Fetch-Site`)."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise Problem(403, "cross-origin request refused")
    origin = request.headers.get("origin")
    if origin is None:
        return
    expected = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin != expected:
        raise Problem(403, "cross-origin request refused")
