"""The pages: `/ui/` (the approval inbox) and `/ui/runs/{run_id}` (a run, live), and their
vendored assets. The HTML is static: every value is put in by script as text (never parsed
as HTML), so nothing a model chose can become markup. `?token=` sets the cookie the pages'
requests carry (SameSite=Strict, HttpOnly) and is dropped from the address at once; only the
service's token sets it (another: 401, no cookie)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from loopstate.service.auth import COOKIE
from loopstate.service.problems import Problem
from loopstate.service.service import Service

ASSETS = {
    "style.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "decide.js": "text/javascript; charset=utf-8",
    "inbox.js": "text/javascript; charset=utf-8",
    "run.js": "text/javascript; charset=utf-8",
    "conversation.js": "text/javascript; charset=utf-8",
    "mermaid.min.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "style-src 'self' 'unsafe-inline'; font-src 'self' data:; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _asset(name: str) -> bytes:
    return resources.files("loopstate.service").joinpath("static", name).read_bytes()


def root() -> APIRouter:
    """`/` (and `/ui` without its slash) lead to the inbox; `/favicon.ico` to its icon."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    @router.get("/ui", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @router.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> RedirectResponse:
        return RedirectResponse("/ui/static/favicon.svg", status_code=301)

    return router


def routes(service: Service) -> APIRouter:
    router = APIRouter(prefix="/ui")

    def page(request: Request, name: str) -> Response:
        token = request.query_params.get("token")
        try:
            if token is not None:
                service.guard.check_token(token)  # a wrong one: 401, and no cookie is set
                response = RedirectResponse(request.url.path, status_code=303)
                response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
                return response
            service.guard.authenticate(request)
        except Problem as refused:  # a browser: still a 401, as a page saying how to log in
            if "text/html" not in request.headers.get("accept", ""):
                raise
            name, status = "login.html", refused.status
        else:
            status = 200
        html = _asset(name)
        return Response(html, status, media_type="text/html; charset=utf-8", headers=HEADERS)

    @router.get("/")
    async def inbox(request: Request) -> Response:
        return page(request, "inbox.html")

    @router.get("/runs/{run_id}")
    async def run_page(request: Request, run_id: str) -> Response:
        return page(request, "run.html")

    @router.get("/static/{name}")
    async def asset(name: str) -> Response:
        media = ASSETS.get(name)
        if media is None:
            raise Problem(404, "no such asset")
        headers = {**HEADERS, "Cache-Control": "public, max-age=3600"}
        return Response(_asset(name), media_type=media, headers=headers)

    return router
