"""The lease keeper renews on a timer while the run works, stops for good once the lease is
lost, and stops at once when the run ends."""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog
from structlog.testing import capture_logs
from support.waiting import until

from loopstate import MemoryStore, RunBusy
from loopstate.engine.lease import LeaseKeeper
from loopstate.engine.logs import get_logger
from loopstate.engine.state import RunState


async def store_with_run(owner: str, lease_s: float) -> MemoryStore:
    store = MemoryStore()
    await store.create(RunState(run_id="r"), owner=owner, now=time.time(), ttl=lease_s)
    return store


async def test_a_run_working_longer_than_its_lease_keeps_others_out() -> None:
    store = await store_with_run("me", 0.15)
    keeper = LeaseKeeper(store, "r", "me", time.time, 0.15, get_logger())
    await asyncio.sleep(0.4)  # more than twice the lease: only renewals keep it
    with pytest.raises(RunBusy, match="busy: me holds it"):
        await store.acquire("r", owner="other", now=time.time(), ttl=1)
    await keeper.stop()
    await asyncio.sleep(0.2)  # stopped: the lease runs out
    await store.acquire("r", owner="other", now=time.time(), ttl=1)


async def test_a_lost_lease_is_logged_once_and_renewed_no_more() -> None:
    store = await store_with_run("thief", 10)
    try:
        with capture_logs() as logs:
            keeper = LeaseKeeper(store, "r", "me", time.time, 0.15, get_logger())
            await until(lambda: logs)  # the first renewal found the lease lost
            await asyncio.sleep(0.3)  # time for several renewals, were it still renewing
            await keeper.stop()
    finally:
        structlog.reset_defaults()  # capture_logs leaves structlog configured
    assert [entry["event"] for entry in logs] == ["lease_lost"]
    assert "thief holds it" in logs[0]["error"]


async def test_stopping_before_the_first_renewal_does_not_wait_for_the_event_loop() -> None:
    store = await store_with_run("me", 30)
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "other work")
    keeper = LeaseKeeper(store, "r", "me", time.time, 30, get_logger())
    await keeper.stop()
    assert ran == []  # no turn of the loop was taken
