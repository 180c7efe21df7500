"""litellm's exceptions as `ModelError`s a caller can act on: the provider's real status,
error type and message, and how long it asked to wait. Duck-typed (no litellm import).

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
    error = _error_object(exc)
    error_type = _text(error.get("code")) or _text(error.get("type"))
    kind = type(exc).__name__
    if kind == "Timeout":
        status, error_type = None, "timeout"
    elif kind == "APIConnectionError" or (headers is None and not error and status in (None, 500)):
        status, error_type = None, _unanswered(exc)
    elif error_type == "overloaded_error":
        status = _OVERLOADED
    return ModelError(
        f"model {model} failed: {kind}: {exc}",
        status=status if isinstance(status, int) else None,
        error_type=error_type,
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
    for link in _chain(exc):
        names = {c.__name__ for c in type(link).__mro__}
        if type(link).__module__.split(".")[0] == "litellm":
            continue  # litellm's wrappers: the cause is further down, if anywhere
        if names & _NO_REPLY:
            return "connection"
        if type(link).__name__ == "OpenAIError":  # the SDK's own base: raised before sending
            return "configuration"
    return "bad_response"


def _chain(exc: BaseException) -> list[BaseException]:
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
    chain = _chain(exc)
    if any(isinstance(e, _CONTRACT) for e in chain):
        return False
    return isinstance(exc, TimeoutError | ConnectionError) or any(
        c.__module__.split(".")[0] in _TRANSPORT for c in type(exc).__mro__
    )


def _error_object(exc: Exception) -> dict[str, Any]:
    """The provider's error object (`{"type", "message", ...}`), wherever litellm left it."""
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        body = _json_in(str(getattr(exc, "message", "") or exc))
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


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def status_error(model: str, response: Any) -> ModelError:
    """The provider's error: its status, its error body's type and message, retry-after."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else body if isinstance(body, dict) else {}
    kind = next(
        (k for k in (error.get("code"), error.get("type")) if isinstance(k, str) and k), None
    )
    message = error.get("message")
    return ModelError(
        f"model {model} failed: HTTP {response.status_code}: {message or response.text[:200]}",
        status=response.status_code,
        error_type=kind,
        provider_message=message if isinstance(message, str) and message else None,
        retry_after=retry_after(response.headers),
    )
