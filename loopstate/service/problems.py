"""Errors as `application/problem+json` (RFC 9457): one type, one handler, one clear line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from loopstate.engine.sanitize import storable

PROBLEM = "application/problem+json"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Problem(Exception):
    """An expected refusal: its status, a one-line `detail`, and optional extra members
    (e.g. `errors`, the field errors of an invalid edit)."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {
            "type": "about:blank",
            "title": _TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
            **self.extra,
        }

    def response(self, headers: Mapping[str, str] | None = None) -> JSONResponse:
        extra = {"WWW-Authenticate": "Bearer"} if self.status == 401 else {}
        return JSONResponse(
            storable(self.body()),  # what it echoes from a request may not encode as sent
            status_code=self.status,
            media_type=PROBLEM,
            headers={**extra, **(headers or {})},
        )


async def problem_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return exc.response()


async def http_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's and FastAPI's own refusals (no such route 404, wrong method 405, a body
    that cannot be parsed 400) as problems too."""
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(exc.status_code, "Error")
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such resource: {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return Problem(exc.status_code, detail).response(exc.headers)


async def error_handler(request: Request, exc: Exception) -> JSONResponse:
    """A failure the service did not expect: one line, no traceback to the client."""
    return Problem(500, f"internal error ({type(exc).__name__}); see the server's log").response()


async def validation_handler(request: Request, exc: Exception) -> JSONResponse:
    """A body or query that does not fit: 422 with the fields named (never the values, which
    may hold what a client should not see echoed)."""
    assert isinstance(exc, RequestValidationError)
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return Problem(400, "the body is not valid JSON").response()
    errors = [
        {"field": ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body",
         "message": str(e.get("msg", "invalid"))}
        for e in exc.errors()
    ]  # fmt: skip
    first = errors[0] if errors else {"field": "body", "message": "invalid"}
    detail = f"invalid request: {first['field']}: {first['message']}"
    return Problem(422, detail, errors=errors).response()
