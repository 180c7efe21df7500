"""`web_fetch`: GET an http(s) URL as text, with a byte cap and one deadline for everything.

The deadline covers connecting, redirects, headers and the body together (a server that
trickles bytes forever is cut off at it); the body is streamed and reading stops after
`max_bytes`, so a huge response costs no more than the cap. Binary bodies are refused.
"""

from __future__ import annotations

import asyncio
import codecs
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
from pydantic import Field

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.workspace import ToolError
from loopstate.tools.decorator import tool

MAX_BYTES = 200_000
TIMEOUT_S = 20.0
MAX_TIMEOUT_S = 120.0
USER_AGENT = "loopstate-web-fetch/0.1"


@tool(category="web", idempotent=True)
async def web_fetch(
    ctx: ToolContext[Any],
    url: str,
    max_bytes: Annotated[int, Field(ge=1, le=MAX_BYTES)] = MAX_BYTES,
    timeout: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = TIMEOUT_S,  # noqa: ASYNC109 (the model sets it)
) -> str:
    """Fetch a web page or text file over http or https; returns the status line and the text.

    Args:
        url: an http:// or https:// URL
        max_bytes: stop reading after this many bytes
        timeout: seconds for the whole request, body included
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs can be fetched, not {scheme or 'this'}")
    try:
        async with asyncio.timeout(timeout):
            status, body, encoding = await _get(url, max_bytes, timeout)
    except TimeoutError:
        raise ToolError(f"{url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
    if b"\x00" in body[:8192]:
        raise ToolError(f"{url} returned binary content; web_fetch returns text only")
    text = bytes(body[:max_bytes]).decode(encoding, errors="replace")
    note = f"\n[truncated at {max_bytes} bytes]" if len(body) > max_bytes else ""
    return f"HTTP {status}\n{text}{note}"


async def _get(url: str, max_bytes: int, timeout: float) -> tuple[int, bytearray, str]:  # noqa: ASYNC109 (the caller's deadline also wraps this)
    """Status, at most `max_bytes + 1` body bytes (one more tells of truncation), encoding."""
    async with (
        httpx.AsyncClient(
            follow_redirects=True,
            timeout=httpx.Timeout(timeout),  # httpx's own 5 s default would undercut ours
            headers={"user-agent": USER_AGENT},
        ) as client,
        client.stream("GET", url) as response,
    ):
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if len(body) > max_bytes:
                break
        return response.status_code, body, _encoding(response)


def _encoding(response: httpx.Response) -> str:
    try:
        return codecs.lookup(response.encoding or "utf-8").name
    except LookupError:  # a charset Python does not know
        return "utf-8"
