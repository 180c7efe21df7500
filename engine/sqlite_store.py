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
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from loopstate.engine.errors import RunBusy, RunNotFound, StoreError
from loopstate.engine.messages import Message
from loopstate.engine.sqlite_errors import store_errors
from loopstate.engine.state import SCHEMA_VERSION, CallRecord, RunState, Transition
from loopstate.engine.store import RunSummary, lease_is_live, summarize

DEFAULT_PATH = Path(".loopstate") / "runs.db"
DB_VERSION = 1
DEFAULT_BUSY_TIMEOUT_S = 10.0
Durability = Literal["process", "power"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    machine TEXT NOT NULL,
    state TEXT NOT NULL,
    status TEXT NOT NULL,
    steps INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    stop_reason TEXT,
    header TEXT NOT NULL,
    lease_owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status);
CREATE TABLE IF NOT EXISTS messages (
    run_id TEXT NOT NULL, idx INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS transitions (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS calls (
    run_id TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
"""

_SPLIT = {"messages", "transitions", "calls"}
_COUNTS = {"messages": "message_count", "transitions": "transition_count", "calls": "call_count"}
"""Header keys holding how many rows each table has for the run: a lost row is detected."""
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


class SQLiteStore:
    """Runs in a SQLite file (default `.loopstate/runs.db` under the working directory).

    `durability="process"` (default): everything committed before an effect survives the
    process being killed (WAL, `synchronous=NORMAL`). `"power"` also survives power loss, at
    the price of an fsync per commit (`synchronous=FULL`). The file is created on first use.
    `busy_timeout` is how long to wait for another process that holds the file locked.

    Every `sqlite3` error (a damaged file, text that is not UTF-8, a lock held too long)
    surfaces as a `StoreError` naming the file and the run.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        durability: Durability = "process",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        self.path = Path(path)
        self.durability = durability
        self.busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r}, durability={self.durability!r})"

    # -- the Store port ----------------------------------------------------------------------

    @store_errors
    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO runs (run_id, machine, state, status, steps, pending, "
                    "created_at, updated_at, stop_reason, header, lease_owner, lease_until) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*_summary_columns(state), _header(state), owner, now + ttl),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"run {state.run_id} already exists in {self.path}") from None
            self._append(db, state, 0, 0)

    @store_errors
    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        update = (
            "UPDATE runs SET machine = ?, state = ?, status = ?, steps = ?, pending = ?, "
            "created_at = ?, updated_at = ?, stop_reason = ?, header = ?, "
            "lease_owner = ?, lease_until = ? WHERE run_id = ?"
        )
        values = (*_summary_columns(state)[1:], _header(state), owner, now + ttl, state.run_id)
        with self._transaction() as db:
            row = db.execute(
                "SELECT lease_owner, lease_until, json_extract(header, '$.message_count'), "
                "json_extract(header, '$.transition_count') FROM runs WHERE run_id = ?",
                (state.run_id,),
            ).fetchone()
            if row is None:
                raise RunNotFound(f"no run {state.run_id!r} in {self.path}")
            holder, until, messages, transitions = row
            if lease_is_live(holder, until, owner=owner, now=now):
                raise RunBusy(
                    f"run {state.run_id} is busy: {holder} holds it for {until - now:.1f} s more"
                )
            if messages is None or transitions is None:  # a header from before the counts
                messages, transitions = self._counts(db, state.run_id)
            if len(state.messages) < messages or len(state.transitions) < transitions:
                raise StoreError(
                    f"run {state.run_id}: refusing to rewrite stored history in {self.path} "
                    f"({len(state.messages)} messages and {len(state.transitions)} transitions "
                    f"given, {messages} and {transitions} stored)"
                )
            db.execute(update, values)
            self._append(db, state, messages, transitions)

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
        db = self._connect()
        row = db.execute("SELECT header FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in {self.path}")
        header = _json(row[0], run_id, "runs", "header")
        version = header.get("schema_version", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(
                f"run {run_id} was written by a newer loopstate (run schema {version}, "
                f"this one reads up to {SCHEMA_VERSION})"
            )
        messages = [
            _validated(_MESSAGE, body, run_id, "messages", idx)
            for idx, body in db.execute(
                "SELECT idx, body FROM messages WHERE run_id = ? ORDER BY idx", (run_id,)
            )
        ]
        transitions = [
            _validated(Transition, body, run_id, "transitions", seq)
            for seq, body in db.execute(
                "SELECT seq, body FROM transitions WHERE run_id = ? ORDER BY seq", (run_id,)
            )
        ]
        calls = [
            _validated(CallRecord, body, run_id, "calls", pos)
            for pos, body in db.execute(
                "SELECT position, body FROM calls WHERE run_id = ? ORDER BY position", (run_id,)
            )
        ]
        for table, rows in (("messages", messages), ("transitions", transitions), ("calls", calls)):
            expected = header.pop(_COUNTS[table], None)
            if expected is not None and expected != len(rows):
                raise StoreError(
                    f"run {run_id}: {len(rows)} {table} rows in {self.path}, "
                    f"its header says {expected}"
                )
        try:
            return RunState.model_validate(
                {**header, "messages": messages, "transitions": transitions, "calls": calls}
            )
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise StoreError(
                f"run {run_id}: corrupt runs row header in {self.path}: "
                f"{first['msg']} at {first['loc']}"
            ) from None

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
    async def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunSummary]:
        query = (
            "SELECT run_id, machine, state, status, steps, pending, created_at, updated_at, "
            "stop_reason FROM runs"
        )
        params: tuple[Any, ...] = ()
        if status is not None:
            query, params = f"{query} WHERE status = ?", (status,)
        rows = self._connect().execute(
            f"{query} ORDER BY updated_at DESC LIMIT ?", (*params, limit)
        )
        return [self._summary(row) for row in rows]

    def _summary(self, row: tuple[Any, ...]) -> RunSummary:
        try:
            return RunSummary.model_validate(dict(zip(RunSummary.model_fields, row, strict=True)))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise StoreError(
                f"run {row[0]}: corrupt runs row in {self.path}: {first['msg']} at {first['loc']}"
            ) from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- plumbing ----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
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
                db.executescript(_SCHEMA)
                db.execute(f"PRAGMA user_version = {DB_VERSION}")
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{self.path} is not a usable loopstate store: {exc}") from None
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _transaction(self) -> _Transaction:
        return _Transaction(self._connect())

    @staticmethod
    def _counts(db: sqlite3.Connection, run_id: str) -> tuple[int, int]:
        (messages,) = db.execute(
            "SELECT COUNT(*) FROM messages WHERE run_id = ?", (run_id,)
        ).fetchone()
        (transitions,) = db.execute(
            "SELECT COUNT(*) FROM transitions WHERE run_id = ?", (run_id,)
        ).fetchone()
        return int(messages), int(transitions)

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
        self, db: sqlite3.Connection, state: RunState, first_message: int, first_transition: int
    ) -> None:
        run_id = state.run_id
        try:
            db.executemany(
                "INSERT INTO messages (run_id, idx, body) VALUES (?, ?, ?)",
                _rows(run_id, first_message, state.messages[first_message:]),
            )
            db.executemany(
                "INSERT INTO transitions (run_id, seq, body) VALUES (?, ?, ?)",
                (
                    (run_id, t.seq, t.model_dump_json())
                    for t in state.transitions[first_transition:]
                ),
            )
        except sqlite3.IntegrityError as exc:
            # Messages and transitions are append-only: a row already there means two writers
            # raced past the lease, never something to paper over.
            raise StoreError(
                f"run {run_id}: refusing to rewrite stored history in {self.path} ({exc})"
            ) from None
        db.executemany(
            "INSERT OR REPLACE INTO calls (run_id, position, body) VALUES (?, ?, ?)",
            _rows(run_id, state.batch_start, state.batch),
        )


class _Transaction:
    """`BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` on any error: a save is all or nothing."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


def open_store(path: str | Path | None = None) -> SQLiteStore:
    """The SQLite store at `path`, or at `.loopstate/runs.db` under the working directory."""
    return SQLiteStore(DEFAULT_PATH if path is None else path)


def _summary_columns(state: RunState) -> tuple[Any, ...]:
    s = summarize(state)
    return (
        s.run_id, s.machine, s.state, s.status, s.steps, s.pending,
        s.created_at, s.updated_at, s.stop_reason,
    )  # fmt: skip


def _header(state: RunState) -> str:
    header = state.model_dump(mode="json", exclude=_SPLIT)
    for table, key in _COUNTS.items():
        header[key] = len(getattr(state, table))
    return json.dumps(header, separators=(",", ":"))


def _rows(run_id: str, start: int, items: Iterable[Any]) -> Iterable[tuple[str, int, str]]:
    return (
        (run_id, start + i, item.model_dump_json(exclude_none=True)) for i, item in enumerate(items)
    )


def _json(text: str, run_id: str, table: str, where: object) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise StoreError(f"run {run_id}: corrupt {table} row {where}: {exc}") from None
    if not isinstance(value, dict):
        raise StoreError(f"run {run_id}: corrupt {table} row {where}: not a JSON object")
    return value


def _validated(kind: Any, body: str, run_id: str, table: str, where: object) -> Any:
    try:
        if isinstance(kind, TypeAdapter):
            return kind.validate_json(body)
        return kind.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise StoreError(
            f"run {run_id}: corrupt {table} row {where}: {first['msg']} at {first['loc']}"
        ) from None
