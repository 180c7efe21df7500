"""`Idempotency-Key`: a repeated request with the same key gets the first answer; the same key
with a different body is refused (422). Kept in this process (bounded, least recent dropped):
after a restart a repeated decision meets the store's used-once rule instead (409)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loopstate.service.problems import Problem

Answer = tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class _Entry:
    fingerprint: str
    answer: Answer


class IdempotencyKeys:
    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._answers: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def once(
        self, scope: str, key: str, body: Any, compute: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        """The answer stored for (`scope`, `key`), or `compute()`'s, stored. A `Problem` is an
        answer too (a refused decision stays refused for that key)."""
        fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        slot = (scope, key)
        lock = self._locks.setdefault(slot, asyncio.Lock())
        async with lock:
            entry = self._answers.get(slot)
            if entry is not None:
                if entry.fingerprint != fingerprint:
                    raise Problem(422, "this Idempotency-Key was used with a different body")
                self._answers.move_to_end(slot)
                return entry.answer
            try:
                answer = await compute()
            except Problem as problem:
                answer = (problem.status, problem.body())
            self._answers[slot] = _Entry(fingerprint, answer)
            if len(self._answers) > self.capacity:
                old, _ = self._answers.popitem(last=False)
                self._locks.pop(old, None)
        return answer
