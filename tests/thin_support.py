"""What the thin-path tests share: counting the calls that reach `litellm.acompletion`, the
requests as the wire carried them, and one call's outcome compared on both paths."""

from __future__ import annotations

from collections.abc import Callable
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
    a: ModelResponse | ModelError, b: ModelResponse | ModelError, timeless: Callable[[str], str]
) -> None:
    """The same reply, or the same error (its message read through `timeless`, which takes
    out the seconds a timeout took: they differ from call to call)."""
    if isinstance(a, ModelError) or isinstance(b, ModelError):
        assert isinstance(a, ModelError), (a, b)
        assert isinstance(b, ModelError), (a, b)
        assert (timeless(str(a)), a.status, a.error_type, a.provider_message) == (
            timeless(str(b)), b.status, b.error_type, b.provider_message
        )  # fmt: skip
        assert (a.retry_after is None) == (b.retry_after is None)
    else:
        assert a == b


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
