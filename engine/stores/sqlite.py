"""`SQLiteStore`: the embedded default store, one SQLite file in WAL mode.

Each run is a header row plus append-only message and transition rows plus one row per call
(only the current batch's rows are rewritten). A save writes what is new since the last one,
in one `BEGIN IMMEDIATE` transaction that also checks and renews the writer's lease.

The calls are synchronous `sqlite3` calls made from async methods: each is well under a
millisecond, which is cheaper than hopping to a thread and back.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Literal

from loopstate.engine.decision_guard import recorded
from loopstate.engine.errors import RunBusy, RunNotFound, StoreError
from loopstate.engine.state import QueuedDecision, RunState
from loopstate.engine.store import (
    Cursor,
    Order,
    Pruned,
    RunEvent,
    RunSummary,
    changed_since,
    lease_is_live,
    ready,
)
from loopstate.engine.stores import sqlite_upkeep as upkeep
from loopstate.engine.stores.codec import (
    LISTED,
    decode_event,
    decode_run,
    definition_body,
    event_row,
    header,
    listed,
    rows,
    summary_columns,
    transition_rows,
)
from loopstate.engine.stores.location import default_sqlite_path
from loopstate.engine.stores.sqlite_answers import Answers, _Transaction
from loopstate.engine.stores.sqlite_errors import store_errors
from loopstate.engine.stores.sqlite_schema import DB_VERSION, MIGRATIONS

DEFAULT_PATH = Path(".loopstate") / "runs.db"  # under the project directory (see `location`)
DEFAULT_BUSY_TIMEOUT_S = 10.0
Durability = Literal["process", "power"]


class SQLiteStore(Answers):
    """Runs in a SQLite file (default: `LOOPSTATE_DB`, else `.loopstate/runs.db` in the nearest
    directory up from the working directory holding `.loopstate/`, `pyproject.toml` or `.git`).

    `durability="process"` (default): everything committed before an effect survives the
    process being killed (WAL, `synchronous=NORMAL`). `"power"` also survives power loss, at
    the price of an fsync per commit (`synchronous=FULL`). The file is created on first use.
    `busy_timeout` is how long to wait for another process that holds the file locked.

    Every `sqlite3` error (a damaged file, text that is not UTF-8, a lock held too long)
    surfaces as a `StoreError` naming the file and the run.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        durability: Durability = "process",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        self.path = Path(path) if path is not None else default_sqlite_path()
        self.durability = durability
        self.busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r}, durability={self.durability!r})"

    # -- the Store port ----------------------------------------------------------------------

    @store_errors
    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        values = (*summary_columns(state), header(state), owner, now + ttl, ready(state))
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO runs (run_id, machine, state, status, steps, pending, "
                    "created_at, updated_at, stop_reason, header, lease_owner, lease_until, "
                    "ready, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, state.revision),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"run {state.run_id} already exists in {self.path}") from None
            self._append(db, state, 0, 0, 0)

    @store_errors
    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> RunState:
        update = (
            "UPDATE runs SET machine = ?, state = ?, status = ?, steps = ?, pending = ?, "
            "created_at = ?, updated_at = ?, stop_reason = ?, header = ?, "
            "lease_owner = ?, lease_until = ?, ready = ?, revision = revision + 1 WHERE run_id = ?"
        )
        values = (
            *summary_columns(state)[1:], header(state), owner, now + ttl, ready(state),
            state.run_id,
        )  # fmt: skip
        with self._transaction() as db:
            row = db.execute(
                "SELECT lease_owner, lease_until, json_extract(header, '$.message_count'), "
                "json_extract(header, '$.transition_count'), revision FROM runs WHERE run_id = ?",
                (state.run_id,),
            ).fetchone()
            if row is None:
                raise RunNotFound(f"no run {state.run_id!r} in {self.path}")
            holder, until, messages, transitions, revision = row
            if lease_is_live(holder, until, owner=owner, now=now):
                raise RunBusy(
                    f"run {state.run_id} is busy: {holder} holds it for {until - now:.1f} s more"
                )
            if revision != state.revision:
                raise changed_since(state.run_id, revision, state.revision)
            if messages is None or transitions is None:  # a header from before the counts
                messages, transitions = upkeep.counts(db, state.run_id)
            if len(state.messages) < messages or len(state.transitions) < transitions:
                raise StoreError(
                    f"run {state.run_id}: refusing to rewrite stored history in {self.path} "
                    f"({len(state.messages)} messages and {len(state.transitions)} transitions "
                    f"given, {messages} and {transitions} stored)"
                )
            db.execute(update, values)
            self._append(db, state, messages, transitions)
        return state.evolve(revision=revision + 1)

    @store_errors
    async def record_decision(self, run_id: str, queued: QueuedDecision) -> bool | None:
        with self._transaction() as db:
            try:
                self._check_lease(db, run_id, "", queued.at)
            except (RunBusy, RunNotFound):
                return None
            state = recorded(self._load(db, run_id), queued)
            if state is None:
                return None
            db.execute(
                "UPDATE runs SET updated_at = ?, header = ?, ready = ?, revision = revision + 1 "
                "WHERE run_id = ?",
                (state.updated_at, header(state), ready(state), run_id),
            )
            db.execute("INSERT INTO events (run_id, body) VALUES (?, ?)", event_row(state))
        return ready(state)

    @store_errors
    async def renew(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        with self._transaction() as db:
            renewed = db.execute(
                "UPDATE runs SET lease_owner = ?, lease_until = ? WHERE run_id = ? "
                "AND (lease_owner IS NULL OR lease_owner = ? OR lease_until <= ?)",
                (owner, now + ttl, run_id, owner, now),
            )
            if renewed.rowcount == 0:
                self._check_lease(db, run_id, owner, now)  # raises unless the holder is dead
                db.execute(
                    "UPDATE runs SET lease_owner = ?, lease_until = ? WHERE run_id = ?",
                    (owner, now + ttl, run_id),
                )

    @store_errors
    async def load(self, run_id: str) -> RunState:
        return self._load(self._connect(), run_id)

    @store_errors
    async def acquire(self, run_id: str, *, owner: str, now: float, ttl: float) -> RunState:
        with self._transaction() as db:
            self._check_lease(db, run_id, owner, now)
            db.execute(
                "UPDATE runs SET lease_owner = ?, lease_until = ? WHERE run_id = ?",
                (owner, now + ttl, run_id),
            )
        return await self.load(run_id)

    @store_errors
    async def release(self, run_id: str, *, owner: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET lease_owner = NULL, lease_until = 0 "
                "WHERE run_id = ? AND lease_owner = ?",
                (run_id, owner),
            )

    @store_errors
    async def claim(self, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
        with self._transaction() as db:
            claimed = upkeep.claim(db, owner=owner, now=now, ttl=ttl, limit=limit)
        return claimed

    @store_errors
    async def list_runs(
        self,
        *,
        status: str | None = None,
        limit: int = 100,
        by: Order = "updated",
        cursor: Cursor | None = None,
    ) -> list[RunSummary]:
        column = "updated_at" if by == "updated" else "created_at"
        where: list[str] = ["1"]
        params: list[Any] = []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if cursor is not None:
            where.append(f"({column}, run_id) < (?, ?)")
            params.extend(cursor)
        rows = self._connect().execute(
            f"SELECT {LISTED.format(p='', h='CAST(header AS BLOB)')} FROM runs r "
            f"WHERE {' AND '.join(where)} ORDER BY {column} DESC, run_id DESC LIMIT ?",
            (*params, limit),
        )
        return [listed(row, str(self.path)) for row in rows]

    @store_errors
    async def events(self, *, after: int, limit: int = 1000) -> list[RunEvent]:
        found = self._connect().execute(
            "SELECT id, body FROM events WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
        )
        return [decode_event(row, str(self.path)) for row in found]

    @store_errors
    async def last_event_id(self) -> int:
        db = self._connect()
        (last,) = db.execute("SELECT max(id) FROM events").fetchone()
        return max(int(last or 0), upkeep.pruned_upto(db))

    @store_errors
    async def prune(
        self, *, before: float, keep_after: int | None = None, now: float | None = None
    ) -> Pruned:
        with self._transaction() as db:
            return upkeep.prune(db, before=before, keep_after=keep_after, now=now)

    @store_errors
    async def keep_cursor(self, process: str, after: int | None, *, now: float, ttl: float) -> int:
        with self._transaction() as db:
            return upkeep.keep_cursor(db, process, after, until=now + ttl)

    @store_errors
    async def pruned_upto(self) -> int:
        return upkeep.pruned_upto(self._connect())

    @store_errors
    async def keep_definition(self, fingerprint: str, body: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO definitions (fingerprint, body) VALUES (?, ?)",
                (fingerprint, json.dumps(body, sort_keys=True)),
            )

    @store_errors
    async def definition(self, fingerprint: str) -> dict[str, Any] | None:
        row = (
            self._connect()
            .execute("SELECT body FROM definitions WHERE fingerprint = ?", (fingerprint,))
            .fetchone()
        )
        return None if row is None else definition_body(row[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- plumbing ----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if self.path.is_dir():  # sqlite3 would say only "unable to open database file"
            raise StoreError(
                f"{self.path} is a directory, not a store file: name a file in it, "
                f"e.g. {self.path / 'runs.db'}"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > DB_VERSION:
                raise StoreError(
                    f"{self.path} has store schema {version}; this loopstate reads up to "
                    f"{DB_VERSION}: upgrade loopstate"
                )
            db.execute("PRAGMA journal_mode = WAL")
            sync = "FULL" if self.durability == "power" else "NORMAL"
            db.execute(f"PRAGMA synchronous = {sync}")
            if version < DB_VERSION:
                self._migrate(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{self.path} is not a usable loopstate store: {exc}") from None
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Apply the migrations this file lacks, in one transaction (another process may be
        doing the same: the version is read again under the write lock)."""
        with _Transaction(db):
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for statement in (s for step in MIGRATIONS[version:] for s in step):
                db.execute(statement)
            if version < 2:
                self._mark_ready(db)
            db.execute(f"PRAGMA user_version = {DB_VERSION}")

    def _mark_ready(self, db: sqlite3.Connection) -> None:
        """Fill `ready` for runs stored before it existed (a corrupt run stays not ready)."""
        waiting = db.execute(
            "SELECT run_id FROM runs WHERE status IN ('running', 'awaiting_approval')"
        ).fetchall()
        for (run_id,) in waiting:
            try:
                is_ready = ready(self._load(db, run_id))
            except StoreError:
                continue
            db.execute("UPDATE runs SET ready = ? WHERE run_id = ?", (is_ready, run_id))

    def _load(self, db: sqlite3.Connection, run_id: str) -> RunState:
        row = db.execute("SELECT header, revision FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in {self.path}")

        def table(sql: str) -> list[tuple[int, Any]]:
            return db.execute(sql, (run_id,)).fetchall()

        return decode_run(
            run_id,
            str(self.path),
            row[0],
            table("SELECT idx, body FROM messages WHERE run_id = ? ORDER BY idx"),
            table("SELECT seq, body FROM transitions WHERE run_id = ? ORDER BY seq"),
            table("SELECT position, body FROM calls WHERE run_id = ? ORDER BY position"),
            revision=row[1],
        )

    def _check_lease(self, db: sqlite3.Connection, run_id: str, owner: str, now: float) -> None:
        row = db.execute(
            "SELECT lease_owner, lease_until FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in {self.path}")
        holder, until = row
        if lease_is_live(holder, until, owner=owner, now=now):
            raise RunBusy(f"run {run_id} is busy: {holder} holds it for {until - now:.1f} s more")

    def _append(
        self,
        db: sqlite3.Connection,
        state: RunState,
        first_message: int,
        first_transition: int,
        first_call: int | None = None,
    ) -> None:
        """Append the messages and transitions from the given indexes, upsert the calls from
        `first_call` (default: the current batch's; a new run's all, a fork's past included)."""
        run_id = state.run_id
        first_call = state.batch_start if first_call is None else first_call
        try:
            db.executemany(
                "INSERT INTO messages (run_id, idx, body) VALUES (?, ?, ?)",
                rows(run_id, first_message, state.messages[first_message:]),
            )
            db.executemany(
                "INSERT INTO transitions (run_id, seq, body) VALUES (?, ?, ?)",
                transition_rows(state, first_transition),
            )
        except sqlite3.IntegrityError as exc:
            # Messages and transitions are append-only: a row already there means two writers
            # raced past the lease, never something to paper over.
            raise StoreError(
                f"run {run_id}: refusing to rewrite stored history in {self.path} ({exc})"
            ) from None
        db.executemany(
            "INSERT OR REPLACE INTO calls (run_id, position, body) VALUES (?, ?, ?)",
            rows(run_id, first_call, state.calls[first_call:]),
        )
        db.execute("INSERT INTO events (run_id, body) VALUES (?, ?)", event_row(state))


def open_store(path: str | Path | None = None) -> SQLiteStore:
    """The SQLite store at `path`, or the project's default (see `SQLiteStore`)."""
    return SQLiteStore(path)
