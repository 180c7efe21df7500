"""The HTTP handler litellm is handed for Anthropic models: litellm's own, recording what
litellm posts with it (`anthropic_direct.py` sends later calls of the same shape itself).

litellm's Anthropic handler posts through an `AsyncHTTPHandler` (its cached one unless a
`client` is passed). `RecordingHandler` is that handler, over the same HTTP client (pool,
transport, timeouts), whose `post` also records the URL, headers, JSON body and timeout of
the request while a capture is open (`openai_client.capturing`). It is built only for the
`anthropic` provider with explicit `api_base` and `api_key`, so nothing litellm would resolve
from the environment is bypassed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from loopstate.engine.models.litellm import _import_litellm
from loopstate.engine.models.openai_client import record

_import_litellm()  # its offline defaults first: this module subclasses one of its classes
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler  # noqa: E402

# With any of these litellm builds or picks its client differently.
_OWN_CLIENT = frozenset({"client", "shared_session", "litellm_params", "api_version"})


@dataclass(frozen=True)
class Posted:
    """One request as litellm's Anthropic handler posted it."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    timeout: Any


class RecordingHandler(AsyncHTTPHandler):
    """litellm's cached Anthropic `AsyncHTTPHandler`, recording what is posted with it."""

    def __init__(self, own: AsyncHTTPHandler) -> None:  # shares `own`'s client: no super()
        self.__dict__.update(own.__dict__)
        self._owns_client = False  # litellm's cache owns and closes it
        self.own = own

    def is_closed(self) -> bool:
        return bool(self._client.is_closed)

    async def post(  # forwards every argument
        self,
        url: str,
        data: Any = None,
        json: Any = None,
        params: Any = None,
        headers: Any = None,
        timeout: Any = None,  # noqa: ASYNC109 - litellm's signature, overridden
        stream: bool = False,
        logging_obj: Any = None,
        files: Any = None,
        content: Any = None,
    ) -> httpx.Response:
        if isinstance(json, dict) and data is None and content is None and not stream:
            record("posted", Posted(url, dict(headers or {}), json, timeout))
        response: httpx.Response = await super().post(
            url, data=data, json=json, params=params, headers=headers, timeout=timeout,
            stream=stream, logging_obj=logging_obj, files=files, content=content,
        )  # fmt: skip
        return response


def anthropic_handler(
    litellm: Any, provider: str, settings: dict[str, Any]
) -> RecordingHandler | None:
    """A recording handler for `settings`, or None when litellm should pick its own."""
    api_base, api_key = settings.get("api_base"), settings.get("api_key")
    if provider != "anthropic" or not isinstance(api_base, str) or not isinstance(api_key, str):
        return None
    if _OWN_CLIENT & settings.keys():
        return None
    from litellm.llms.custom_httpx.http_handler import get_async_httpx_client

    own = get_async_httpx_client(llm_provider=litellm.LlmProviders.ANTHROPIC)
    return RecordingHandler(own)
