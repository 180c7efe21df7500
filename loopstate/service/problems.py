"""Errors as `application/problem+json` (RFC 9457): one type, one handler, one clear line."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

PROBLEM = "application/problem+json"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Content",
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

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(
            self.body(), status_code=self.status, media_type=PROBLEM, headers=headers
        )


async def problem_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return exc.response()


async def validation_handler(request: Request, exc: Exception) -> JSONResponse:
    """A body or query that does not fit: 422 with the fields named (never the values, which
    may hold what a client should not see echoed)."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body",
         "message": str(e.get("msg", "invalid"))}
        for e in exc.errors()
    ]  # fmt: skip
    first = errors[0] if errors else {"field": "body", "message": "invalid"}
    detail = f"invalid request: {first['field']}: {first['message']}"
    return Problem(422, detail, errors=errors).response()
