"""A lease holder for the takeover tests: takes run RUN_ID's lease for 30 s, says `held` on
stdout, and waits until it is killed.

python takeover_child.py DB RUN_ID   (DB: a SQLite path or a postgresql:// DSN)
"""

from __future__ import annotations

import asyncio
import sys

from loopstate import PostgresStore, Store
from loopstate.engine.clock import system_clock
from loopstate.engine.store import lease_owner
from loopstate.engine.stores.sqlite import SQLiteStore


async def hold(db: str, run_id: str) -> None:
    store: Store = PostgresStore(db) if db.startswith("postgresql") else SQLiteStore(db)
    await store.acquire(run_id, owner=lease_owner(), now=system_clock(), ttl=30.0)
    print("held", flush=True)
    await asyncio.Event().wait()  # its connection (PostgreSQL: its session) stays open


if __name__ == "__main__":
    asyncio.run(hold(sys.argv[1], sys.argv[2]))
