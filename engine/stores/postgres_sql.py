"""The PostgreSQL store's statements: each write of the port is one statement, so one round trip.

A save is one statement whose first part updates the run's row only if the writer may
(`MAY_WRITE`: its lease, or a free, expired or orphaned one), the stored counts are those
the writer appends after and the stored `revision` is the one it read (a decision recorded
since changes no count but bumps it: fencing); every other part (the new messages and
transitions, the upserted calls, the log entry) selects from that update, so a refused save
writes nothing. The log entry takes `EVENTS_LOCK` (transaction-scoped) before its id is
drawn: ids are drawn one writer at a time and committed in id order (see `postgres_schema`);
in one statement, the lock is held from there to the commit without a round trip between.

A lease records the holder's session (`lease_session`): a key of a session-level advisory lock
the holder's connection took when it opened (`SESSION_CLASS`). A session that no longer
exists (its process died, its connection dropped) holds no lock: its runs are orphaned and
may be taken at once (`ORPHANED`), without waiting for the lease to expire.
"""

from __future__ import annotations

import json
from typing import Any

from loopstate.engine.decision_guard import decidable
from loopstate.engine.state import RunState
from loopstate.engine.store import Cursor, Order, pause_key, ready
from loopstate.engine.stores.codec import (
    LISTED,
    event_row,
    header,
    rows,
    summary_columns,
    transition_rows,
)
from loopstate.engine.stores.postgres_schema import EVENTS_LOCK

SESSION_CLASS = 72_046
"""pg_advisory_lock(SESSION_CLASS, key): "the connection whose leases carry `key` is open"."""
WAKE = "loopstate_ready"
"""The NOTIFY channel: a run may have become ready for a worker (`release`)."""

ORPHANED = (
    "(r.lease_session IS NOT NULL AND r.lease_session <> ALL (ARRAY("
    "SELECT l.objid::bigint FROM pg_locks l WHERE l.locktype = 'advisory' "
    f"AND l.classid = {SESSION_CLASS} AND l.objsubid = 2 AND l.granted)))"
)
"""The run `r`'s lease holder's session is gone (its advisory lock is held by nobody)."""
MAY_WRITE = (
    "(r.lease_owner IS NULL OR r.lease_owner = %(owner)s OR r.lease_until <= %(now)s "
    f"OR r.lease_owner = %(gone)s OR {ORPHANED})"
)
"""`owner` may write run `r` at `now` (`gone`: a holder known dead, else None)."""

_HEADER = (
    "machine = %(machine)s, state = %(state)s, status = %(status)s, steps = %(steps)s, "
    "pending = %(pending)s, created_at = %(created_at)s, updated_at = %(updated_at)s, "
    "stop_reason = %(stop_reason)s, header = %(header)s, message_count = %(m)s, "
    "transition_count = %(t)s, lease_owner = %(owner)s, lease_until = %(until)s, "
    "lease_session = %(session)s, ready = %(ready)s, decidable = %(decidable)s::jsonb, "
    "revision = %(revision)s + 1"
)
_APPEND = """,
m AS (INSERT INTO loopstate_messages (run_id, idx, body)
      SELECT run.run_id, x.i, x.b FROM run, unnest(%(mi)b::int[], %(mb)b::text[]) AS x(i, b)),
t AS (INSERT INTO loopstate_transitions (run_id, seq, body)
      SELECT run.run_id, x.i, x.b FROM run, unnest(%(ti)b::int[], %(tb)b::text[]) AS x(i, b)),
c AS (INSERT INTO loopstate_calls (run_id, position, body)
      SELECT run.run_id, x.i, x.b FROM run, unnest(%(ci)b::int[], %(cb)b::text[]) AS x(i, b)
      ON CONFLICT (run_id, position) DO UPDATE SET body = EXCLUDED.body),
e AS (INSERT INTO loopstate_events (run_id, body)
      SELECT run.run_id, %(event)s FROM run,
      LATERAL (SELECT pg_advisory_xact_lock(%(lock)s) WHERE run.run_id IS NOT NULL) AS held)
SELECT (SELECT count(*) FROM run), p.fingerprint, p.at FROM (SELECT 1) AS one
LEFT JOIN loopstate_answers p ON p.key = %(pause)s"""

SAVE = (
    f"WITH run AS (UPDATE loopstate_runs r SET {_HEADER} WHERE r.run_id = %(run_id)s "
    f"AND r.message_count = %(m0)s AND r.transition_count = %(t0)s AND {MAY_WRITE} "
    "AND r.revision = %(revision)s "
    "RETURNING r.run_id)" + _APPEND
)
"""Save a run (see the module's doc); answers 1 if written, 0 if refused."""
CREATE = (
    "WITH run AS (INSERT INTO loopstate_runs (run_id, machine, state, status, steps, pending, "
    "created_at, updated_at, stop_reason, header, message_count, transition_count, "
    "lease_owner, lease_until, lease_session, ready, decidable, revision) VALUES (%(run_id)s, "
    "%(machine)s, %(state)s, %(status)s, %(steps)s, %(pending)s, %(created_at)s, "
    "%(updated_at)s, %(stop_reason)s, %(header)s, %(m)s, %(t)s, %(owner)s, %(until)s, "
    "%(session)s, %(ready)s, %(decidable)s::jsonb, %(revision)s) "
    "RETURNING run_id)" + _APPEND
)
LEASE = (
    "UPDATE loopstate_runs r SET lease_owner = %(owner)s, lease_until = %(until)s, "
    f"lease_session = %(session)s WHERE r.run_id = %(run_id)s AND {MAY_WRITE} RETURNING 1"
)
"""Take or extend `owner`'s lease (`acquire`, `renew`): one row if taken."""
RELEASE = (
    "WITH r AS (UPDATE loopstate_runs SET lease_owner = NULL, lease_until = 0, "
    "lease_session = NULL WHERE run_id = %s AND lease_owner = %s RETURNING ready) "
    f"SELECT pg_notify('{WAKE}', '') FROM r WHERE r.ready"
)
"""Give the lease up; a run left ready wakes the listening workers (in one statement)."""
CLAIM = (
    "UPDATE loopstate_runs SET lease_owner = %(owner)s, lease_until = %(until)s, "
    "lease_session = %(session)s WHERE run_id IN (SELECT r.run_id FROM loopstate_runs r "
    "WHERE r.ready AND (r.lease_until <= %(now)s OR "
    f"(r.lease_owner IS DISTINCT FROM %(owner)s AND {ORPHANED})) "
    "ORDER BY r.updated_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) RETURNING run_id, updated_at"
)
"""Lease up to `limit` ready runs whose lease expired or whose holder's session is gone."""
_CALL = "r.decidable -> %(call_id)s::text"
_INBOX = (
    "jsonb_set(r.header::jsonb, '{inbox}', (r.header::jsonb -> 'inbox') || jsonb_build_array("
    f"jsonb_set(%(queued)s::jsonb, '{{decision,digest}}', {_CALL} -> 'digest')))"
)
RECORD_DECISION = (
    "WITH run AS (UPDATE loopstate_runs r SET updated_at = greatest(r.updated_at, %(now)s), "
    f"header = jsonb_set({_INBOX}, '{{updated_at}}', "
    "to_jsonb(greatest(r.updated_at, %(now)s)))::text, "
    "decidable = nullif(r.decidable - %(call_id)s::text, '{}'::jsonb), "
    "ready = (r.decidable - %(call_id)s::text) = '{}'::jsonb, revision = r.revision + 1 "
    "WHERE r.run_id = %(run_id)s AND r.status = 'awaiting_approval' "
    f"AND ({_CALL} -> 'kinds') ? %(kind)s::text "
    f"AND (%(digest)s::text IS NULL OR {_CALL} ->> 'digest' = %(digest)s::text) "
    f"AND (r.lease_owner IS NULL OR r.lease_until <= %(now)s OR {ORPHANED}) "
    "RETURNING r.run_id, r.state, r.status, r.pending, r.updated_at, r.ready, "
    "r.transition_count, jsonb_array_length(r.header::jsonb -> 'inbox') AS queued), "
    "e AS (INSERT INTO loopstate_events (run_id, body) SELECT run.run_id, json_build_object("
    "'run_id', run.run_id, 'state', run.state, 'status', run.status, 'pending', run.pending, "
    "'queued', run.queued, 'seq', coalesce((SELECT max(seq) FROM loopstate_transitions x "
    "WHERE x.run_id = run.run_id), 0), 'updated_at', run.updated_at)::text FROM run, "
    "LATERAL (SELECT pg_advisory_xact_lock(%(lock)s)) AS held) "
    "SELECT run.ready, woken.n FROM run LEFT JOIN LATERAL "
    f"(SELECT 1 AS n, pg_notify('{WAKE}', '') WHERE run.ready) AS woken ON true"
)
"""Record a decision in one statement (see `engine/decision_guard`): guarded by what the
checker said when the run was saved (`decidable`: the call waits, with this digest, and
accepts this kind) and by the lease (free, expired or orphaned); the call leaves `decidable`
(used once), the log gains an entry, a run now ready wakes the workers. A row (whether the
run is ready) if recorded; none if refused."""
HOLDER = (
    "SELECT lease_owner, lease_until, message_count, transition_count, revision "
    "FROM loopstate_runs WHERE run_id = %s"
)
"""Why a write was refused: the run's holder, counts and revision (None: no such run)."""
LOAD = (
    "SELECT r.header, m.i, m.b, t.i, t.b, c.i, c.b, r.revision, p.fingerprint, p.at "
    "FROM loopstate_runs r "
    "CROSS JOIN LATERAL (SELECT array_agg(idx ORDER BY idx) i, array_agg(body ORDER BY idx) b "
    "FROM loopstate_messages WHERE run_id = r.run_id) m "
    "CROSS JOIN LATERAL (SELECT array_agg(seq ORDER BY seq) i, array_agg(body ORDER BY seq) b "
    "FROM loopstate_transitions WHERE run_id = r.run_id) t "
    "CROSS JOIN LATERAL (SELECT array_agg(position ORDER BY position) i, "
    "array_agg(body ORDER BY position) b FROM loopstate_calls WHERE run_id = r.run_id) c "
    "LEFT JOIN loopstate_answers p ON p.key = %s WHERE r.run_id = %s"
)
"""A run's rows and its pause request (`pause_key`, then the run's id) in one statement: one
snapshot, one round trip. Saves answer the pause request too: the driver's check at its next
step boundary reads it from there, not with a statement of its own."""
EVENTS = "SELECT id, body FROM loopstate_events WHERE id > %s ORDER BY id LIMIT %s"
LAST_EVENT = (
    "SELECT greatest((SELECT max(id) FROM loopstate_events), "
    "(SELECT max(upto) FROM loopstate_pruned))"
)
"""The log's last id, counting what was pruned (ids are never reused)."""
KEEP_DEFINITION = (
    "INSERT INTO loopstate_definitions (fingerprint, body) VALUES (%s, %s) "
    "ON CONFLICT (fingerprint) DO NOTHING"
)
DEFINITION = "SELECT body FROM loopstate_definitions WHERE fingerprint = %s"
RESERVE = (
    "INSERT INTO loopstate_answers (key, fingerprint, at) VALUES (%s, %s, %s) "
    "ON CONFLICT (key) DO NOTHING RETURNING key"
)
"""Keep a key (an idempotency key, a pause request) unless it is kept: a row if now kept."""
KEPT = "SELECT fingerprint, status, body, at FROM loopstate_answers WHERE key = %s FOR UPDATE"
RETAKE = (
    "INSERT INTO loopstate_answers (key, fingerprint, at) VALUES (%s, %s, %s) "
    "ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, "
    "status = NULL, body = NULL, at = EXCLUDED.at"
)
"""Take a key over whose first holder gave no answer in time."""
PRUNE_EVENTS = (
    "WITH gone AS (DELETE FROM loopstate_events WHERE id <= %(upto)s AND id < coalesce(("
    "SELECT id FROM loopstate_events WHERE (body::json->>'updated_at')::float8 >= %(before)s "
    "ORDER BY id LIMIT 1), 9223372036854775807) RETURNING id), "
    "mark AS (UPDATE loopstate_pruned SET upto = greatest(upto, (SELECT max(id) FROM gone))) "
    "SELECT count(*) FROM gone"
)
"""Drop the log's entries up to id `upto` written before `before` (ids grow with time: the
first entry at or after it, and every later one, is kept); the highest id dropped is kept
in `loopstate_pruned`. Answers how many were dropped."""


def list_query(
    status: str | None, by: Order, cursor: Cursor | None, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """`list_runs`'s statement and parameters (see `Store.list_runs`)."""
    column = "updated_at" if by == "updated" else "created_at"
    where: list[str] = ["true"]
    params: list[Any] = []
    if status is not None:
        where.append("status = %s")
        params.append(status)
    if cursor is not None:
        where.append(f"({column}, run_id) < (%s, %s)")
        params.extend(cursor)
    sql = (
        f"SELECT {LISTED.format(p='loopstate_', h='header')} FROM loopstate_runs r "
        f"WHERE {' AND '.join(where)} ORDER BY {column} DESC, run_id DESC LIMIT %s"
    )
    return sql, (*params, limit)


def write_params(
    state: RunState, *, owner: str, until: float, session: int, first: tuple[int, int, int]
) -> dict[str, Any]:
    """The parameters of `SAVE` and `CREATE` for `state`: the rows from the `first` message,
    transition and call on, the header, the lease."""
    m0, t0, c0 = first
    columns = summary_columns(state)
    named = ("machine", "state", "status", "steps", "pending", "created_at", "updated_at")
    messages = list(rows(state.run_id, m0, state.messages[m0:]))
    transitions = list(transition_rows(state, t0))
    calls = list(rows(state.run_id, c0, state.calls[c0:]))
    return {
        "run_id": state.run_id,
        **dict(zip(named, columns[1:8], strict=True)),
        "stop_reason": columns[8],
        "header": header(state),
        "m": len(state.messages),
        "t": len(state.transitions),
        "m0": m0,
        "t0": t0,
        "revision": state.revision,
        "owner": owner,
        "until": until,
        "session": session,
        "ready": ready(state),
        "decidable": _json_or_none(decidable(state)),
        "mi": [r[1] for r in messages],
        "mb": [r[2] for r in messages],
        "ti": [r[1] for r in transitions],
        "tb": [r[2] for r in transitions],
        "ci": [r[1] for r in calls],
        "cb": [r[2] for r in calls],
        "event": event_row(state)[1],
        "lock": EVENTS_LOCK,
        "pause": pause_key(state.run_id),
    }


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))
