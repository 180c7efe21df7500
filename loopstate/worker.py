"""`Worker`: claims stored runs that are ready to continue and resumes each to its next stop.

Several workers (processes, hosts) may share one store: `Store.claim` leases each ready run to
one of them, and the worker resumes it under that lease. A run whose worker died (SIGKILL, a
lost host) is `running` with a lease nobody renews; another worker claims it once the lease
expires, or at once when its holder is provably gone (a process of this host that no longer
exists; on PostgreSQL, a session that no longer exists), and the crash rules apply
(`Executor.recover`: a non-idempotent tool is never run again).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from loopstate.engine.clock import Clock
from loopstate.engine.deadlines import DeadlineWatch
from loopstate.engine.errors import IncompatibleRun, LoopstateError, RunBusy, RunDamaged
from loopstate.engine.logs import get_logger
from loopstate.engine.store import DEFAULT_LEASE_S, Waking, lease_owner

if TYPE_CHECKING:
    from loopstate.engine.store import Store


class Resumable(Protocol):
    """What a worker drives: an `Agent`, a `Flow`, or anything that resumes their runs (the
    HTTP service resumes each run with the agent that started it)."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    async def resume(
        self, run_id: str, *, owner: str | None = None, drain: asyncio.Event | None = None
    ) -> Any: ...


class Worker:
    """Resumes the runs of `target`'s store that are ready, `concurrency` at a time, polling
    the store every `poll_s` seconds when none is (a `Waking` store also wakes it at once).
    `lease_s` is the claimed lease's length: give the same to the target
    (`clone(lease_s=...)`), whose saves renew it. Approval deadlines that passed are applied
    every `deadlines_every_s` seconds (None: by another process, not this worker)."""

    def __init__(
        self,
        target: Resumable,
        *,
        concurrency: int = 4,
        poll_s: float = 1.0,
        lease_s: float = DEFAULT_LEASE_S,
        owner: str | None = None,
        log: Any = None,
        deadlines_every_s: float | None = 1.0,
    ) -> None:
        self.target = target
        self.store = target.store
        self.concurrency = concurrency
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.owner = owner or lease_owner()
        self.log = (log or get_logger()).bind(worker=self.owner)
        self.resumed = 0
        self.claims = 0
        """How many times the store answered its claim for ready runs."""
        self.deadlines = (
            None
            if deadlines_every_s is None
            else DeadlineWatch(self.store, clock=target.clock, every_s=deadlines_every_s)
        )
        """Applies passed approval deadlines (`DeadlineWatch`); None: another process does."""
        self._in_flight: set[str] = set()
        self._finished = asyncio.Event()
        self._stop = asyncio.Event()

    async def serve(self, stop: asyncio.Event) -> None:
        """Claim and resume runs until `stop` is set, then let each run in hand finish its
        current step (saved; its lease released, so another worker continues it) and return."""
        self._stop = stop
        async with contextlib.AsyncExitStack() as stack:
            if isinstance(self.store, Waking):  # woken when a run is left ready, not polled
                await stack.enter_async_context(self.store.listen(self.wake))
            await self._serve(stop)

    async def _serve(self, stop: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as tasks:
            while not stop.is_set():
                self._finished.clear()
                await self._expire()
                claimed = await self._claim()
                for run_id in claimed:
                    self._in_flight.add(run_id)
                    tasks.create_task(self._resume(run_id))
                if not claimed or len(self._in_flight) >= self.concurrency:
                    await self._pause(stop)

    def wake(self) -> None:
        """Claim now rather than at the next poll (e.g. a run's last decision just arrived)."""
        self._finished.set()

    async def _expire(self) -> None:
        """Apply the approval deadlines that passed (`expire_due`): their runs become ready."""
        if self.deadlines is None:
            return
        try:
            if await self.deadlines.scan():
                self.log.info("deadlines_applied")
        except LoopstateError as exc:  # a store that failed now is tried again next poll
            self.log.warning("deadlines_failed", error=str(exc).splitlines()[0])

    async def _claim(self) -> list[str]:
        free = self.concurrency - len(self._in_flight)
        if free <= 0:
            return []
        claimed = await self.store.claim(
            owner=self.owner, now=self.target.clock(), ttl=self.lease_s, limit=free
        )
        self.claims += 1
        # A run in hand whose lease ran out between two saves: it is ours, claimed again.
        return [run_id for run_id in claimed if run_id not in self._in_flight]

    async def _resume(self, run_id: str) -> None:
        try:
            result = await self.target.resume(run_id, owner=self.owner, drain=self._stop)
            self.resumed += 1
            self.log.info("worker_resumed", run_id=run_id, status=result.status)
        except IncompatibleRun as exc:  # skipped, not failed: a deploy or a migration fixes it
            self.log.warning(
                "worker_run_incompatible", run_id=run_id, reason="; ".join(exc.differences)
            )
            await self._back_off(run_id)
        except RunBusy as exc:  # another writer has it, or wrote it since: not held back, a
            # run left ready is claimed again at once and read afresh
            self.log.warning("worker_run_moved", run_id=run_id, error=str(exc).splitlines()[0])
        except Exception as exc:  # one run's failure must not stop the others
            error = (str(exc).splitlines() or [type(exc).__name__])[0]
            # a run the store cannot read is skipped and named; its rows are left as they are
            event = "worker_run_damaged" if isinstance(exc, RunDamaged) else "worker_resume_failed"
            self.log.error(event, run_id=run_id, error=error)
            await self._back_off(run_id)
        finally:
            self._in_flight.discard(run_id)
            self._finished.set()

    async def _back_off(self, run_id: str) -> None:
        """Hold a run that could not be resumed for one lease, so that no worker retries it
        in a tight loop (e.g. a queued edit its tool refuses); it is claimed again after."""
        with contextlib.suppress(LoopstateError):  # gone, or another's: nothing to hold
            await self.store.renew(
                run_id, owner=self.owner, now=self.target.clock(), ttl=self.lease_s
            )

    async def _pause(self, stop: asyncio.Event) -> None:
        """Until `stop`, a run finishing (a free slot), or the poll interval."""
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._finished.wait())]
        try:
            await asyncio.wait(waits, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
