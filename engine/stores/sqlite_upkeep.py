"""What the SQLite store does beyond a run's own rows: claiming ready runs (an expired lease,
or a holder on this host whose process is gone: no wait for its lease) and pruning the event
log and the idempotency answers."""

from __future__ import annotations

import socket
import sqlite3

from loopstate.engine.clock import system_clock
from loopstate.engine.store import Pruned, claimable


def claim(db: sqlite3.Connection, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
    """Lease to `owner` up to `limit` ready runs, least recently updated first, inside the
    caller's write transaction: those whose lease expired, and those leased to a process of
    this host that is gone (`claimable`)."""
    host = socket.gethostname() + ":"
    candidates = db.execute(
        "SELECT run_id, lease_owner, lease_until FROM runs WHERE ready = 1 AND "
        "(lease_until <= ? OR substr(lease_owner, 1, ?) = ?) ORDER BY updated_at",
        (now, len(host), host),
    )
    claimed: list[str] = []
    for run_id, holder, until in candidates:
        if len(claimed) == limit:
            break
        if claimable(holder, until, owner=owner, now=now):
            claimed.append(run_id)
    db.executemany(
        "UPDATE runs SET lease_owner = ?, lease_until = ? WHERE run_id = ?",
        ((owner, now + ttl, run_id) for run_id in claimed),
    )
    return claimed


def prune(
    db: sqlite3.Connection, *, before: float, keep_after: int | None, now: float | None
) -> Pruned:
    """Inside the caller's write transaction: drop the log's entries written before `before`
    (the first entry at or after it, and every later one, is kept: ids grow with time), none
    above `keep_after` or a stream cursor live at `now` (`keep_cursor`), and the answers kept
    since before `before`."""
    now = system_clock() if now is None else now
    db.execute("DELETE FROM cursors WHERE until <= ?", (now,))  # their processes are gone
    (cursor,) = db.execute("SELECT min(after) FROM cursors").fetchone()
    if cursor is not None:
        keep_after = cursor if keep_after is None else min(keep_after, cursor)
    (first_kept,) = db.execute(
        "SELECT min(id) FROM events WHERE json_extract(body, '$.updated_at') >= ?", (before,)
    ).fetchone()
    upto = pruned_upto(db) if first_kept is None else first_kept - 1
    if first_kept is None:
        (last,) = db.execute("SELECT max(id) FROM events").fetchone()
        upto = max(upto, last or 0)
    if keep_after is not None:
        upto = min(upto, keep_after)
    events = db.execute("DELETE FROM events WHERE id <= ?", (upto,)).rowcount
    if events:
        db.execute("UPDATE pruned SET upto = max(upto, ?)", (upto,))
    answers = db.execute("DELETE FROM answers WHERE at < ?", (before,)).rowcount
    return Pruned(events=events, answers=answers)


def pruned_upto(db: sqlite3.Connection) -> int:
    """The highest id pruned from the log (0: none)."""
    (upto,) = db.execute("SELECT max(upto) FROM pruned").fetchone()
    return int(upto or 0)


def keep_cursor(db: sqlite3.Connection, process: str, after: int | None, *, until: float) -> int:
    """Inside the caller's write transaction: publish (or, `after` None, drop) `process`'s
    stream cursor (see `Prunable.keep_cursor`); the log's pruned start."""
    if after is None:
        db.execute("DELETE FROM cursors WHERE process = ?", (process,))
    else:
        db.execute(
            "INSERT INTO cursors (process, after, until) VALUES (?, ?, ?) ON CONFLICT (process) "
            "DO UPDATE SET after = excluded.after, until = excluded.until",
            (process, after, until),
        )
    return pruned_upto(db)


def counts(db: sqlite3.Connection, run_id: str) -> tuple[int, int]:
    """How many messages and transitions the file holds for the run (a header from before it
    kept the counts)."""
    (messages,) = db.execute("SELECT COUNT(*) FROM messages WHERE run_id = ?", (run_id,)).fetchone()
    (transitions,) = db.execute(
        "SELECT COUNT(*) FROM transitions WHERE run_id = ?", (run_id,)
    ).fetchone()
    return int(messages), int(transitions)
