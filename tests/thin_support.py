"""What the thin-path tests share: counting the calls that reach `litellm.acompletion`, the
requests as the wire carried them, and one call's outcome compared on both paths."""

from __future__ import annotations

from typing import Any

import pytest

from loopstate.engine.errors import ModelError
from loopstate.engine.model import ModelResponse
from loopstate.engine.models.litellm import _import_litellm


class Counting:
    """While entered, counts the calls that reach `litellm.acompletion` (`reached`)."""

    def __init__(self) -> None:
        self.litellm = _import_litellm()
        self.original = self.litellm.acompletion
        self.reached = 0

    async def _counting(self, **arguments: Any) -> Any:
        self.reached += 1
        return await self.original(**arguments)

    def __enter__(self) -> Counting:
        self.litellm.acompletion = self._counting
        return self

    def __exit__(self, *exc: object) -> None:
        self.litellm.acompletion = self.original


def wire(requests: list[Any]) -> list[tuple[str, dict[str, str], bytes]]:
    """Each request's path, headers in order (but the host, a port) and body bytes."""
    return [(r.path, {k: v for k, v in r.headers.items() if k != "host"}, r.raw) for r in requests]


def same_outcome(
    a: ModelResponse | ModelError, b: ModelResponse | ModelError, *, made: bool = False
) -> None:
    """The same reply, or the same error: status, whether it may be retried and after how
    long; the provider's error type and message where litellm keeps them (for some statuses
    its mapping drops the error body: the fast path reads it), the wording around them each
    path's own.

    The reply's `response_id`: the fast path reads the provider's id from every reply;
    litellm's path keeps it where litellm does (OpenAI-compatible replies), and has None
    where litellm replaces it with an id of its own (Anthropic's `msg_...`). A reply litellm
    `made` itself (of an output-limit 400) has litellm's random id there, and None here."""
    if isinstance(a, ModelError) or isinstance(b, ModelError):
        assert isinstance(a, ModelError), (a, b)
        assert isinstance(b, ModelError), (a, b)
        assert (a.status, a.retryable) == (b.status, b.retryable), (a, b)
        assert a.error_type in (None, b.error_type), (a.error_type, b.error_type)
        assert a.provider_message in (None, b.provider_message), (a, b)
        assert (a.retry_after is None) == (b.retry_after is None)
    else:
        if made:
            assert b.response_id is None
        else:
            assert a.response_id in (None, b.response_id), (a.response_id, b.response_id)
        assert a.model_copy(update={"response_id": None}) == b.model_copy(
            update={"response_id": None}
        )


def reads_of(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[bool]:
    """Whether each call of `owner.name` (a reader of plain replies, None for any other)
    read its reply, while the test runs."""
    reads: list[bool] = []
    reader = getattr(owner, name)

    def spied(*arguments: Any) -> Any:
        read = reader(*arguments)
        reads.append(read is not None)
        return read

    monkeypatch.setattr(owner, name, spied)
    return reads
