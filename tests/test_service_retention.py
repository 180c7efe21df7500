"""Retention: the service prunes the store's event log, never an entry a connected all-runs
client has not been sent; a client that reconnects inside the retained window gets exactly
what it missed, one that reconnects from before it gets a `reset` event, not silence."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import worker_agent
from service_support import in_uvicorn
from support.waiting import until

from loopstate.engine.clock import system_clock
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.service import Service


async def next_events(lines: AsyncIterator[str], count: int) -> list[tuple[str, str, str]]:
    """The next `count` events (id, event, data) of an open SSE stream; comments skipped."""
    found: list[tuple[str, str, str]] = []
    fields: dict[str, str] = {}
    async for line in lines:
        if not line:
            if "data" in fields:
                found.append((fields.get("id", ""), fields.get("event", "message"), fields["data"]))
                if len(found) == count:
                    return found
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    raise AssertionError(f"the stream ended after {found}")


async def suspended_runs(store: SQLiteStore, names: list[str]) -> None:
    agent = worker_agent.agent(store)
    for name in names:
        await agent.run("go", run_id=name)


async def test_pruning_keeps_what_a_connected_client_was_not_sent_and_resets_an_older_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    store, elsewhere = SQLiteStore(db), SQLiteStore(db)  # `elsewhere`: as another process
    await suspended_runs(store, ["a", "b"])
    first = await store.last_event_id()
    service = Service({"worker": worker_agent.agent(store)}, store=store, poll_s=3600.0)
    async with in_uvicorn(service) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        headers = {"Last-Event-ID": "0", "Accept": "text/event-stream"}
        async with client.stream("GET", "/api/events", headers=headers) as live:
            lines = live.aiter_lines()
            sent = await next_events(lines, first)  # the log so far, then it waits
            assert [int(i) for i, _, _ in sent] == list(range(1, first + 1))
            await suspended_runs(elsewhere, ["c"])  # written where this service does not look
            unsent = [e.id for e in await store.events(after=first)]
            assert unsent  # …until its next poll, an hour away
            pruned = await service.hub.prune(0.0, system_clock())  # everything is old
            assert pruned is not None
            assert pruned.events == first  # all that was sent; nothing the client still needs
            assert [e.id for e in await store.events(after=0)] == unsent
            service.hub.touch("c")  # look now: the client gets what it was not sent, exactly
            got = await next_events(lines, len(unsent))
            assert [int(i) for i, _, _ in got] == unsent
        inside = {"Last-Event-ID": str(first), "Accept": "text/event-stream"}  # in the window
        async with client.stream("GET", "/api/events", headers=inside) as again:
            got = await next_events(again.aiter_lines(), len(unsent))
            assert [int(i) for i, _, _ in got] == unsent
        older = {"Last-Event-ID": "1", "Accept": "text/event-stream"}  # before the window
        async with client.stream("GET", "/api/events", headers=older) as behind:
            lines = behind.aiter_lines()
            [(event_id, kind, data)] = await next_events(lines, 1)
            assert kind == "reset"
            assert json.loads(data) == {"pruned_upto": first, "head": unsent[-1]}
            assert event_id == str(unsent[-1])
            await suspended_runs(elsewhere, ["d"])
            service.hub.touch("d")  # it follows on from the head
            [(_, kind, data)] = await next_events(lines, 1)
            assert (kind, json.loads(data)["run_id"]) == ("run", "d")
    store.close()
    elsewhere.close()


async def test_a_service_with_a_retention_setting_prunes_the_log_when_it_starts(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    await suspended_runs(store, ["a"])
    last = await store.last_event_id()
    await store.reserve_key("k", "f", now=system_clock(), stale_s=60.0)
    # a retention of 0 s: everything written before the service started is old enough
    service = Service({"worker": worker_agent.agent(store)}, store=store, retention_s=0.0)
    async with in_uvicorn(service):
        await until(store.pruned_upto)  # it pruned at start (then it would hourly)
        assert await store.pruned_upto() == last
        assert await store.events(after=0) == []
        assert await store.reserve_key("k", "g", now=system_clock(), stale_s=60.0) is None
    store.close()
