"""Failed calls as `ModelError`s a caller can act on: the provider's real status, error type
and message, and how long it asked to wait; from litellm's exceptions and httpx's failures
(`model_error`: the fast path's timeouts and dropped connections too) or from the fast path's
error replies (`status_error`), the same way. Duck-typed (no litellm import).

What litellm 1.106 gives (checked over real HTTP): `status_code` (Anthropic's 529
"overloaded" arrives as 500, its body type says `overloaded_error`), the response headers in
`litellm_response_headers` (`response.headers` is a synthesized, empty copy), OpenAI's error
object in `body`, Anthropic's only as JSON inside the message. A dropped connection arrives
as a 500 with no response headers.
"""

from __future__ import annotations

import email.utils
import json
import time
from contextlib import suppress
from typing import Any

from loopstate.engine.errors import ModelError

_OVERLOADED = 529


def model_error(exc: Exception, model: str) -> ModelError:
    if "LLM Provider NOT provided" in str(exc):  # litellm cannot route the name
        return ModelError(
            f"unknown model provider in {model!r}: start the name with its provider, e.g. "
            "openai/gpt-4o-mini or anthropic/claude-sonnet-4-5 "
            "(the list: https://docs.litellm.ai/docs/providers)",
            error_type="unknown_provider",
        )
    headers = getattr(exc, "litellm_response_headers", None)
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    error = _error_object(
        body if isinstance(body, dict) else _json_in(str(getattr(exc, "message", "") or exc))
    )
    kind, error_type = type(exc).__name__, None
    if kind == "Timeout" or _named(exc, {"TimeoutException"}):  # litellm's; httpx's
        status, error_type = None, "timeout"
    elif kind == "APIConnectionError" or (headers is None and not error and status in (None, 500)):
        status, error_type = None, _unanswered(exc)
    elif _kind(error) == "overloaded_error":
        status = _OVERLOADED
    status = status if isinstance(status, int) else None
    return _made(model, f"{kind}: {exc}", status, error, headers, error_type)


def status_error(model: str, response: Any) -> ModelError:
    """The provider's error reply: its status, its error body's type and message, retry-after."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    error = _error_object(body)
    detail = f"HTTP {response.status_code}: {_text(error.get('message')) or response.text[:200]}"
    return _made(model, detail, response.status_code, error, response.headers)


def _made(
    model: str, detail: str, status: int | None, error: dict[str, Any], headers: Any,
    error_type: str | None = None,
) -> ModelError:  # fmt: skip
    return ModelError(
        f"model {model} failed: {detail}",
        status=status,
        error_type=error_type or _kind(error),
        provider_message=_text(error.get("message")),
        retry_after=retry_after(headers),
    )


# Failures of the connection itself, by the class names httpx, httpcore, aiohttp, the SDK and
# Python give them (a class of that name anywhere in the cause's own hierarchy).
_NO_REPLY = frozenset(
    {"TransportError", "APIConnectionError", "ClientError", "ConnectionError", "TimeoutError",
     "TimeoutException", "ProtocolError", "OSError"}
)  # fmt: skip


def _unanswered(exc: BaseException) -> str:
    """Why no status came with `exc`: the connection failed (`connection`, retryable), the
    SDK was not configured (`configuration`: no API key; not retryable), or a reply came that
    could not be read (`bad_response`: a proxy's HTML page, JSON that is not a completion)."""
    for link in causes(exc):
        if type(link).__module__.split(".")[0] == "litellm":
            continue  # litellm's wrappers: the cause is further down, if anywhere
        if _named(link, _NO_REPLY):
            return "connection"
        if type(link).__name__ == "OpenAIError":  # the SDK's own base: raised before sending
            return "configuration"
    return "bad_response"


def _named(exc: BaseException, names: set[str] | frozenset[str]) -> bool:
    """Whether a class of one of `names` is in `exc`'s own hierarchy."""
    return any(c.__name__ in names for c in type(exc).__mro__)


def causes(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes, outermost first (litellm's `original_exception` first)."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and len(chain) < 16 and link not in chain:
        chain.append(link)
        original = getattr(link, "original_exception", None)
        link = (
            original
            if isinstance(original, BaseException)
            else (link.__cause__ or link.__context__)
        )
    return chain


# What a changed litellm or SDK raises (a name moved, a signature changed): never a provider's.
_CONTRACT = (ImportError, AttributeError, TypeError, NameError)
# Where the provider's and the network's failures come from.
_TRANSPORT = frozenset({"openai", "litellm", "httpx", "httpcore", "anyio"})


def provider_failure(exc: BaseException) -> bool:
    """Whether `exc` reports the provider or the network (a status, a timeout, a dropped
    connection), not code that no longer fits (`_CONTRACT` anywhere in its causes)."""
    if any(isinstance(e, _CONTRACT) for e in causes(exc)):
        return False
    return isinstance(exc, TimeoutError | ConnectionError) or any(
        c.__module__.split(".")[0] in _TRANSPORT for c in type(exc).__mro__
    )


def _error_object(body: Any) -> dict[str, Any]:
    """The provider's error object (`{"type", "message", ...}`) in its error body."""
    if not isinstance(body, dict):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body


def _json_in(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _kind(error: dict[str, Any]) -> str | None:
    return _text(error.get("code")) or _text(error.get("type"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if headers is None:
        return None
    given = headers.get("retry-after")
    for value, scale in ((headers.get("retry-after-ms"), 1000.0), (given, 1.0)):
        with suppress(TypeError, ValueError):
            return max(0.0, float(value) / scale)
    with suppress(TypeError, ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(given).timestamp() - time.time())
    return None
