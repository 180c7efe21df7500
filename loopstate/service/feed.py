"""The live side of the event streams: one poller per process reads the store-wide event log
(`Store.events`: every write of every run, by any process, in commit order) as it grows — at
once when a run of this process moved (through a hook), else every `poll_s` — keeps its
recent entries in memory, and tells the streams that follow them to look again.

Nothing here is the record: a run's stream sends its transitions as the store holds them
(SSE id: the transition `seq`), the all-runs stream sends the log's entries (SSE id: the
entry's id), so a client that reconnects with `Last-Event-ID` is sent exactly what came
after it, from whichever process serves it, after a restart too. A notice only says "look
again".

Retention (`Service(retention_s=...)`): the hub prunes the store's log of entries older than
that, at start and every `PRUNE_EVERY_S`, but never one a connected all-runs client has not
been sent, whichever process serves it: every process publishes its cursor in the store (the
lowest id its connected all-runs clients were sent up to, `Prunable.keep_cursor`) when a
client connects and every `CURSOR_EVERY_S` while any is connected, and a prune anywhere (the
CLI's `loopstate store prune` too) keeps every entry after a live cursor; a process that
died stops holding entries back once its cursor is `CURSOR_TTL_S` old. A client that
reconnects from an entry pruned meanwhile (`Last-Event-ID` below `Prunable.pruned_upto`) is
told so by a `reset` event, then follows from the log's end.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.errors import LoopstateError
from loopstate.engine.logs import get_logger
from loopstate.engine.store import CURSOR_TTL_S, Prunable, Pruned, RunEvent, Store, lease_owner
from loopstate.engine.streaming import TextDelta, ToolCallDelta

RECENT = 10_000
"""Log entries kept in memory for the streams (an older `Last-Event-ID` reads the store)."""
PAGE = 1000
"""Log entries read from the store at once."""
BACKLOG = 10_000
"""Notices held for one client that does not read (beyond: dropped; it catches up from the
store on its next notice or reconnect)."""
PRUNE_EVERY_S = 3600.0
"""How often a service with a retention setting prunes the store's log."""
CURSOR_EVERY_S = CURSOR_TTL_S / 4
"""How often a process with connected all-runs clients publishes its cursor again."""
DELTAS = 256
"""Deltas held for one client: beyond, its live text has gaps (deltas are never stored)."""


@dataclass(frozen=True)
class Notice:
    """Run `run_id` changed (its log entry: `event`, once the poller read it)."""

    run_id: str
    event: RunEvent | None = None
    seq: int | None = None
    """Transition `seq` was just saved by this process (a stream sends up to it, so the
    deltas that follow come after it); None: look at everything stored."""


Item = Notice | TextDelta | ToolCallDelta
"""What a stream's queue receives: a notice to look again, or a live delta (runs of this
process only)."""


class Hub:
    def __init__(
        self,
        store: Store,
        moved: asyncio.Event,
        *,
        poll_s: float = 0.25,
        clock: Clock = system_clock,
    ) -> None:
        self.store = store
        self.clock = clock
        self.process = lease_owner()  # whose cursor this hub publishes
        self._cursor_kept = False
        self.moved = moved
        self.poll_s = poll_s
        self._runs: dict[str, set[asyncio.Queue[Item]]] = defaultdict(set)
        self._all: set[asyncio.Queue[Item]] = set()
        self._recent: list[RunEvent] = []
        self._floor = 0  # every entry after it, up to `_head`, is in `_recent`
        self._head: int | None = None
        self._starting = asyncio.Lock()
        self._sent: dict[asyncio.Queue[Item], int] = {}  # all-runs clients: sent up to id
        self._pruning = asyncio.Lock()
        self.log = get_logger().bind(component="service.feed")
        self.decided: Callable[[], None] = lambda: None
        """Called when a run's last pending call got its decision (from any process)."""

    def subscribe(self, run_id: str | None) -> asyncio.Queue[Item]:
        queue: asyncio.Queue[Item] = asyncio.Queue()
        (self._all if run_id is None else self._runs[run_id]).add(queue)
        return queue

    def unsubscribe(self, run_id: str | None, queue: asyncio.Queue[Item]) -> None:
        if run_id is None:
            self._all.discard(queue)
            self._sent.pop(queue, None)
            return
        followers = self._runs.get(run_id)
        if followers is not None:
            followers.discard(queue)
            if not followers:
                del self._runs[run_id]

    @property
    def clients(self) -> int:
        return len(self._all) + sum(len(q) for q in self._runs.values())

    def touch(self, run_id: str, seq: int | None = None) -> None:
        """Run `run_id` changed here (a decision queued over HTTP, an abort), or by transition
        `seq` of a run this process drives: look at the log now."""
        self._publish(Notice(run_id, None, seq))
        self.moved.set()

    async def serve(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wait(stop), self.poll_s)
            self.moved.clear()
            try:
                await self.poll()
            except LoopstateError as exc:  # the store is unreachable: streams just wait
                self.log.warning("feed_poll_failed", error=str(exc).splitlines()[0])

    async def _wait(self, stop: asyncio.Event) -> None:
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.moved.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def head(self) -> int:
        """The id of the newest log entry this hub has read (at first: the store's newest)."""
        async with self._starting:  # once: a stream and the poller may both ask first
            if self._head is None:
                self._head = self._floor = await self.store.last_event_id()
        return self._head

    async def poll(self) -> None:
        """Read what the log gained since the last poll; tell every stream."""
        head = await self.head()
        while batch := await self.store.events(after=head, limit=PAGE):
            self._recent.extend(batch)
            head = self._head = batch[-1].id
            for event in batch:
                self._publish(Notice(event.run_id, event))
                if event.status == "awaiting_approval" and 0 < event.pending <= event.queued:
                    self.decided()  # ready to continue: claim it now, not at the next poll
            if len(batch) < PAGE:
                break
        if len(self._recent) > 2 * RECENT:
            self._floor = self._recent[-RECENT - 1].id
            del self._recent[:-RECENT]

    async def since(self, after: int) -> list[RunEvent]:
        """Log entries after id `after`, oldest first: those this hub has read (from memory),
        or, for an `after` older than it holds, up to `PAGE` of them from the store."""
        if after < self._floor or self._head is None:
            return await self.store.events(after=after, limit=PAGE)
        start = bisect.bisect_right(self._recent, after, key=lambda e: e.id)
        return self._recent[start:]

    async def follow(self, queue: asyncio.Queue[Item], after: int | None) -> tuple[int, int | None]:
        """Where all-runs client `queue` starts: after `after` (None: the log's end), kept from
        pruning from then on; and, if entries after `after` were pruned, the id they were
        pruned up to (the client must start over: a `reset`), the start then being the end."""
        async with self._pruning:  # a prune anywhere sees the client's cursor, or is seen
            head = await self.head()
            start, pruned = (head if after is None else after), None
            self._sent[queue] = start
            if isinstance(self.store, Prunable):
                upto = await self._keep_cursor(self.store)
                if after is not None and after < upto:
                    start, pruned = max(head, upto), upto
                    self._sent[queue] = start
        return start, pruned

    async def _keep_cursor(self, store: Prunable) -> int:
        """Publish this process's cursor (none once no all-runs client is connected); where
        the log starts, as it is once the cursor is in place."""
        after = min(self._sent.values(), default=None)
        self._cursor_kept = after is not None
        return await store.keep_cursor(self.process, after, now=self.clock(), ttl=CURSOR_TTL_S)

    async def cursors(self, stop: asyncio.Event) -> None:
        """Publish this process's cursor every `CURSOR_EVERY_S` while it has all-runs clients
        (then once more, to drop it), until `stop`."""
        if not isinstance(self.store, Prunable):
            return
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), CURSOR_EVERY_S)
            if self._sent or self._cursor_kept:
                try:
                    async with self._pruning:
                        await self._keep_cursor(self.store)
                except LoopstateError as exc:  # the store is unreachable: at the next turn
                    self.log.warning("feed_cursor_failed", error=str(exc).splitlines()[0])

    def sent(self, queue: asyncio.Queue[Item], upto: int) -> None:
        """All-runs client `queue` was sent the log up to id `upto`."""
        self._sent[queue] = upto

    async def prune(self, older_than_s: float, now: float) -> Pruned | None:
        """Prune the store's log and answers older than `older_than_s` (see the module's doc)."""
        if not isinstance(self.store, Prunable):
            return None
        async with self._pruning:
            if self._sent or self._cursor_kept:  # its own cursor as it is now, for all to see
                await self._keep_cursor(self.store)
            keep_after = min(self._sent.values(), default=None)
            before = now - older_than_s
            return await self.store.prune(before=before, keep_after=keep_after, now=now)

    async def keep(self, older_than_s: float, clock: Clock, stop: asyncio.Event) -> None:
        """Prune at once and every `PRUNE_EVERY_S` until `stop`."""
        while not stop.is_set():
            try:
                pruned = await self.prune(older_than_s, clock())
                self.log.info("feed_pruned", **(pruned.model_dump() if pruned else {}))
            except LoopstateError as exc:  # the store is unreachable: try at the next turn
                self.log.warning("feed_prune_failed", error=str(exc).splitlines()[0])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), PRUNE_EVERY_S)

    def delta(self, delta: TextDelta | ToolCallDelta) -> None:
        """A delta of a run this process drives, for the streams that follow that run."""
        for queue in self._runs.get(delta.run_id, ()):
            if queue.qsize() < DELTAS:
                queue.put_nowait(delta)

    def _publish(self, notice: Notice) -> None:
        for queue in (*self._all, *self._runs.get(notice.run_id, ())):
            if queue.qsize() < BACKLOG:
                queue.put_nowait(notice)
