"""Who is asking, and may they: the token (Bearer header, or the cookie the pages get), the
cross-origin refusal of state-changing requests, and the `authorize` hook whose answer is the
`actor` in the audit trail; an `Identity` it returns may carry a tenant (see `tenancy`) and
roles (`viewer`: may read, not act)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict

from loopstate.service.problems import Problem
from loopstate.service.tenancy import Tenancy

Action = Literal["read", "start", "decide", "abort", "message"]
VIEWER = "viewer"
"""The role that may read every run of its tenant but start, decide, abort nothing."""


class Identity(BaseModel):
    """Who acts: `name` (the actor in the audit trail), the `tenant` whose runs it sees and
    starts (None: every run), and its `roles`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tenant: str | None = None
    roles: tuple[str, ...] = ()

    @property
    def may_act(self) -> bool:
        return VIEWER not in self.roles


Authorize = Callable[[Request, Action, str | None], Awaitable["str | Identity | None"]]
"""`authorize(request, action, run_id)` → the acting identity (a name, or an `Identity` with a
tenant and roles), or None to refuse (403). `run_id` is None for actions on no single run
(listing, starting)."""

COOKIE = "loopstate_token"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


async def anyone(request: Request, action: Action, run_id: str | None) -> str | None:
    """The default policy: whoever holds the token may do everything, as `http`."""
    return "http"


class Guard:
    def __init__(self, token: str | None, authorize: Authorize, tenancy: Tenancy) -> None:
        self.token = token
        self.authorize = authorize
        self.tenancy = tenancy

    async def identity(self, request: Request, action: Action, run_id: str | None) -> str:
        """The actor's name for `action` (see `who`)."""
        return (await self.who(request, action, run_id)).name

    async def who(self, request: Request, action: Action, run_id: str | None) -> Identity:
        """The actor for `action`, or a `Problem`: 401 without the token, 403 for a
        state-changing request from another origin, one `authorize` refuses, or an action by
        a viewer; 404 for a run of another tenant."""
        self.authenticate(request)
        if request.method not in _SAFE:
            same_origin(request)
        answer = await self.authorize(request, action, run_id)
        if not answer:
            raise Problem(403, f"not allowed to {action}")
        who = answer if isinstance(answer, Identity) else Identity(name=answer)
        if run_id is not None and not await self.tenancy.visible(who.tenant, run_id):
            raise Problem(404, f"no run {run_id!r}")
        if action != "read" and not who.may_act:
            raise Problem(403, f"{who.name} may view runs, not {action} them")
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
