"""`web_fetch`: GET an http(s) URL with a size cap and a total deadline."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import httpx

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.workspace import ToolError
from loopstate.tools.decorator import tool

MAX_BYTES = 200_000
TIMEOUT_S = 20.0


@tool(category="web", idempotent=True)
async def web_fetch(
    ctx: ToolContext[Any],
    url: str,
    max_bytes: int = MAX_BYTES,
    timeout: float = TIMEOUT_S,  # noqa: ASYNC109 (a parameter the model sets)
) -> str:
    """Fetch a web page or file over http or https and return its text.

    Args:
        url: an http:// or https:// URL
        max_bytes: stop reading after this many bytes
        timeout: seconds for the whole request, body included
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs can be fetched, not {scheme or 'this'}")
    limit = min(max(max_bytes, 1), MAX_BYTES)
    try:
        async with (
            asyncio.timeout(timeout),
            httpx.AsyncClient(follow_redirects=True) as client,
            client.stream("GET", url) as response,
        ):
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) > limit:
                    break
            encoding = response.encoding or "utf-8"
            status = response.status_code
    except TimeoutError:
        raise ToolError(f"{url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"fetching {url} failed: {exc}") from None
    text = bytes(body[:limit]).decode(encoding, errors="replace")
    note = f"\n[truncated at {limit} bytes]" if len(body) > limit else ""
    return f"HTTP {status}\n{text}{note}"
