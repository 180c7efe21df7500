"""`Idempotency-Key`: a repeated request with the same key gets the first answer; the same key
with a different body is refused (422). The answers are kept in the store (`reserve_key`,
`keep_answer`), so they hold across restarts and for every server process on the store.

A request first reserves its key (scope + key, hashed) with its body's fingerprint, computes
its answer, then stores it. A repeat that finds the key reserved but not yet answered (the
first request is still at work, here or in another process) waits for the answer, up to
`wait_s`; a reservation left unanswered for `stale_s` (its process died) is taken over.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.store import Store
from loopstate.service.problems import Problem

Answer = tuple[int, dict[str, Any]]


class IdempotencyKeys:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = system_clock,
        stale_s: float = 60.0,
        wait_s: float = 10.0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.stale_s = stale_s
        self.wait_s = wait_s
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def once(
        self, scope: str, key: str, body: Any, compute: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        """The answer stored for (`scope`, `key`), or `compute()`'s, stored. A `Problem` is an
        answer too (a refused decision stays refused for that key)."""
        fingerprint = _digest(json.dumps(body, sort_keys=True))
        slot = _digest(json.dumps([scope, key]))
        lock, users = self._locks.get(slot, (asyncio.Lock(), 0))
        self._locks[slot] = (lock, users + 1)
        try:
            async with lock:  # one request per key at a time in this process: no polling
                return await self._once(slot, fingerprint, compute)
        finally:
            lock, users = self._locks[slot]
            if users == 1:
                del self._locks[slot]
            else:
                self._locks[slot] = (lock, users - 1)

    async def _once(
        self, slot: str, fingerprint: str, compute: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while (
            kept := await self.store.reserve_key(
                slot, fingerprint, now=self.clock(), stale_s=self.stale_s
            )
        ) is not None:
            if kept.fingerprint != fingerprint:
                raise Problem(422, "this Idempotency-Key was used with a different body")
            if kept.status is not None:
                return kept.status, kept.body or {}
            if loop.time() > deadline:
                raise Problem(409, "a request with this Idempotency-Key is still in progress")
            await asyncio.sleep(0.05)  # another process is answering it
        try:
            answer = await compute()
        except Problem as problem:
            answer = (problem.status, problem.body())
        except BaseException:
            await asyncio.shield(self.store.drop_key(slot))  # nothing stored: may be retried
            raise
        await self.store.keep_answer(slot, *answer)
        return answer


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
