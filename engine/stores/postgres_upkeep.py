"""The PostgreSQL store's retention: pruning the event log and the idempotency answers, and
the stream clients' cursors every service process publishes so that a prune run by any
process (the CLI's too) keeps what a client connected elsewhere still needs.

A cursor is published under a share lock of the `loopstate_pruned` row, which a prune holds
exclusively from before it reads the cursors until it commits: a cursor published while a
prune runs waits for it and then reads where the log starts now (its client is told it must
start over), and a prune that starts after a cursor was published sees it.
"""

from __future__ import annotations

from typing import Any

import psycopg

from loopstate.engine.clock import system_clock
from loopstate.engine.store import Pruned
from loopstate.engine.stores.postgres_sql import PRUNE_EVENTS

KEEP_CURSOR = (
    "WITH held AS (SELECT upto FROM loopstate_pruned FOR SHARE), "
    "kept AS (INSERT INTO loopstate_cursors (process, after, until) "
    "VALUES (%(process)s, %(after)s, %(until)s) ON CONFLICT (process) "
    "DO UPDATE SET after = EXCLUDED.after, until = EXCLUDED.until) "
    "SELECT max(upto) FROM held"
)
DROP_CURSOR = (
    "WITH held AS (SELECT upto FROM loopstate_pruned FOR SHARE), "
    "gone AS (DELETE FROM loopstate_cursors WHERE process = %(process)s) "
    "SELECT max(upto) FROM held"
)


async def keep_cursor(
    db: psycopg.AsyncConnection[Any], process: str, after: int | None, *, until: float
) -> int:
    """Publish (or, `after` None, drop) `process`'s cursor in one statement (one round trip);
    the log's pruned start as it is once the cursor is in place."""
    sql = DROP_CURSOR if after is None else KEEP_CURSOR
    found = await db.execute(sql, {"process": process, "after": after, "until": until})
    row = await found.fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


async def prune(
    db: psycopg.AsyncConnection[Any], *, before: float, keep_after: int | None, now: float | None
) -> Pruned:
    """Inside the caller's transaction: lock where the log starts, then drop what no live
    cursor nor `keep_after` needs (see `PRUNE_EVENTS`), the stale cursors, and the answers
    kept since before `before`."""
    await db.execute("SELECT upto FROM loopstate_pruned FOR UPDATE")
    now = system_clock() if now is None else now
    await db.execute("DELETE FROM loopstate_cursors WHERE until <= %s", (now,))
    found = await db.execute(
        "SELECT least(%s::bigint, (SELECT min(after) FROM loopstate_cursors), greatest("
        "(SELECT max(id) FROM loopstate_events), (SELECT max(upto) FROM loopstate_pruned)))",
        (keep_after,),
    )
    row = await found.fetchone()
    upto = int(row[0] or 0) if row is not None else 0
    gone = await db.execute(PRUNE_EVENTS, {"upto": upto, "before": before})
    events = await gone.fetchone()
    answers = await db.execute("DELETE FROM loopstate_answers WHERE at < %s", (before,))
    return Pruned(events=events[0] if events else 0, answers=answers.rowcount)
