"""`Service`: what the HTTP surface needs, in one object — the store, the agents and who
drives their runs, the event feed, the guard, idempotency — and its lifespan (the claim loop
and the feed poller run while the app serves)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loopstate.engine.store import Store
from loopstate.service.auth import Authorize, Guard, anyone
from loopstate.service.door import MAX_BODY
from loopstate.service.feed import Hub
from loopstate.service.idempotency import IdempotencyKeys
from loopstate.service.runner import Runner
from loopstate.service.tenancy import Tenancy

if TYPE_CHECKING:
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow


@dataclass(frozen=True)
class StreamPolicy:
    """How SSE streams behave: a keep-alive comment every `ping_s`; a stream ends after
    `lifetime_s` and tells the client to reconnect after `retry_ms` (with `Last-Event-ID`)."""

    ping_s: float = 15.0
    lifetime_s: float = 300.0
    retry_ms: int = 1000


class Service:
    """The agents served by name, on one `store` (default: the first agent's; each agent is
    cloned onto it). `token`: required as `Authorization: Bearer` (or the pages' cookie);
    None leaves authentication to `authorize`, which names the actor of every request or
    refuses it (default: everyone is `http`). `poll_s`: how soon a change made by another
    process on the store reaches this one's streams. `stream`: whether served model calls
    stream (the pages then show the model's text live); a provider that refuses a streamed
    request with a 4xx saying so gets that step again as a plain call (logged once per
    model). `stream=False` makes every call a plain one. `max_body`: the largest request body
    taken, in bytes (larger: 413, unread). `retention_s`: prune the store's event log and
    idempotency answers older than this many seconds, at start and hourly, never an entry a
    stream client connected to this or any other service process still needs (None: keep
    them; `loopstate store prune` does it from outside, keeping the same entries)."""

    def __init__(
        self,
        agents: Mapping[str, Agent | Flow],
        *,
        store: Store | None = None,
        token: str | None = None,
        authorize: Authorize = anyone,
        streams: StreamPolicy = StreamPolicy(),
        poll_s: float = 0.25,
        concurrency: int = 16,
        stream: bool = True,
        max_body: int = MAX_BODY,
        retention_s: float | None = None,
    ) -> None:
        if store is None:
            if not agents:
                raise ValueError("pass a store, or at least one agent (whose store is used)")
            store = next(iter(agents.values())).store
        self.store = store
        self.runner = Runner(agents, store, concurrency=concurrency, stream=stream)
        self.hub = Hub(store, self.runner.moved, poll_s=poll_s, clock=self.runner.clock)
        self.runner.signals.deltas = self.hub.delta
        self.runner.signals.changed = self.hub.touch
        self.hub.decided = self.runner.worker.wake
        self.guard = Guard(token, authorize, Tenancy(store))
        self.keys = IdempotencyKeys(store, clock=self.runner.clock)
        self.streams = streams
        self.max_body = max_body
        self.retention_s = retention_s
        self.locks: dict[str, asyncio.Lock] = {}

    def run_lock(self, run_id: str) -> asyncio.Lock:
        """Decisions on one run are taken one at a time in this process (another process
        meets the run's lease: 409 busy)."""
        return self.locks.setdefault(run_id, asyncio.Lock())

    @asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        """Run the claim loop and the feed while the app serves (pass to FastAPI, or enter
        it from your own app's lifespan when you mount the router). The store is read once
        first: one that cannot be used fails the start, rather than a server that answers
        every request with 500 once its loops have died."""
        await self.store.list_runs(limit=1)
        stop = asyncio.Event()
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.runner.serve(stop))
            tasks.create_task(self.hub.serve(stop))
            tasks.create_task(self.hub.cursors(stop))
            if self.retention_s is not None:
                tasks.create_task(self.hub.keep(self.retention_s, self.runner.clock, stop))
            try:
                yield
            finally:
                stop.set()
