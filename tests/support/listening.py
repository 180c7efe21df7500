"""A stream's listener for tests: what the model path reported, in order; no retry expected."""

from __future__ import annotations

from typing import Any


class Listener:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    async def text(self, text: str) -> None:
        self.seen.append(("text", text))

    async def tool_call(self, index: int, cid: str | None, name: str | None, args: str) -> None:
        self.seen.append(("call", index, cid, name, args))

    def new_attempt(self) -> None:
        raise AssertionError("no retry here")
