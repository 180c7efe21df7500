"""The OpenAI client litellm is handed for OpenAI-compatible models: the same request on the
wire, without the OpenAI SDK's per-call walk of the whole history.

The SDK runs every `chat.completions.create` payload through `_utils/_transform.py`, which
walks each message and tool with typing introspection: ~0.25 ms of CPU per message on every
call, so O(n) per call and O(n²) per run, blocking the event loop meanwhile (a known upstream
problem: anthropic-sdk-python #1195, openai-python #3616). For plain JSON data that walk is the
identity, so `messages` and `tools` go through `extra_body` instead (the workaround of #1195):
the transform sees empty placeholders, and the SDK's merge (`{**body, **extra_body}`) puts the
real values back in the placeholders' places, so the body's keys, order and bytes are unchanged.

The client is built the way litellm builds its own (the same SDK, defaults and headers) over
the HTTP pool of litellm's own cached client for the same settings, and reused for every call
of one `LiteLLMModel` on one event loop; it is used only when the
provider is `openai` and `api_base` and `api_key` are explicit settings, so nothing litellm
would resolve from the environment or a custom client is bypassed. Everything else, and every
other provider, goes through litellm unchanged.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any

from openai import AsyncOpenAI
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions

# Sent through `extra_body`: the payload that grows with the history.
_MOVED = ("messages", "tools")
# With any of these litellm builds a client differently (Azure AD, workload identity, ...).
_OWN_CLIENT = frozenset(
    {"client", "api_version", "azure_ad_token", "litellm_params", "shared_session"}
)


_capture: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "loopstate_openai_capture", default=None
)


def record(params: dict[str, Any]) -> None:
    """Called by the direct client with what litellm hands it: kept if a capture is open."""
    captured = _capture.get()
    if captured is not None:
        captured.append(dict(params))


@contextmanager
def capturing() -> Iterator[list[dict[str, Any]]]:
    captured: list[dict[str, Any]] = []
    token = _capture.set(captured)
    try:
        yield captured
    finally:
        _capture.reset(token)


class _Completions(AsyncCompletions):
    async def create(self, **params: Any) -> Any:  # forwards every argument, typed by the SDK
        record(params)  # what litellm built, for the thin path's template (openai_direct.py)
        moved = {key: params[key] for key in _MOVED if key in params}
        for key in moved:
            params[key] = []  # a placeholder keeps the key's place in the body
        params["extra_body"] = {**moved, **(params.get("extra_body") or {})}
        return await super().create(**params)


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class DirectPayloadClient(AsyncOpenAI):
    """`AsyncOpenAI` whose chat completions send messages and tools untransformed."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)


def direct_payload_client(
    litellm: Any, provider: str, settings: dict[str, Any]
) -> DirectPayloadClient | None:
    """A client for `settings`, or None when litellm should build its own."""
    api_base, api_key = settings.get("api_base"), settings.get("api_key")
    if provider != "openai" or not isinstance(api_base, str) or not isinstance(api_key, str):
        return None
    if _OWN_CLIENT & settings.keys():
        return None
    try:
        # litellm's own cached client for these settings: its HTTP pool (litellm's transport,
        # which litellm owns and closes) is shared, so this client holds nothing to close.
        own = litellm.main.openai_chat_completions.get_openai_client(
            is_async=True, api_key=api_key, api_base=api_base, max_retries=0,
            organization=settings.get("organization"),
        )  # fmt: skip
        pool = own._client
    except (AttributeError, TypeError):  # another litellm inside: its own path, unchanged
        return None
    return DirectPayloadClient(
        api_key=api_key,
        base_url=api_base,
        http_client=pool,
        organization=settings.get("organization"),
        max_retries=0,  # litellm sets the call's own retries on the client it is given
    )
