"""The lease a process keeps on the run it drives: renewed every third of its length, so it
expires only if the process stops.

A timer, not a task: a run that ends before its first renewal (most runs) costs no task and
no extra turn of the event loop to stop it; a task exists only while a renewal is under way.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from loopstate.engine.clock import Clock
from loopstate.engine.errors import RunBusy
from loopstate.engine.store import Store


class LeaseKeeper:
    """Renews `run_id`'s lease for `owner` until `stop`; a lost lease is logged and not
    renewed again (the run's next save raises `RunBusy` and stops it there)."""

    def __init__(
        self, store: Store, run_id: str, owner: str, clock: Clock, lease_s: float, log: Any
    ) -> None:
        self._store, self._run_id, self._owner = store, run_id, owner
        self._clock, self._lease_s, self._log = clock, lease_s, log
        self._interval = max(lease_s / 3, 0.05)
        self._loop = asyncio.get_running_loop()
        self._renewal: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(self._interval, self._due)

    def _due(self) -> None:
        self._timer = None
        self._renewal = self._loop.create_task(self._renew())

    async def _renew(self) -> None:
        try:
            await self._store.renew(
                self._run_id, owner=self._owner, now=self._clock(), ttl=self._lease_s
            )
        except RunBusy as exc:
            self._log.error("lease_lost", error=str(exc))
            return
        self._timer = self._loop.call_later(self._interval, self._due)

    async def stop(self) -> None:
        """Renew no more; a renewal under way is cancelled, one that failed raises here."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        renewal, self._renewal = self._renewal, None
        if renewal is not None:
            renewal.cancel()  # nothing if it is done; awaiting a done task does not yield
            with suppress(asyncio.CancelledError):
                await renewal
