"""What a `SQLiteStore` keeps besides runs, in its `answers` table: idempotency keys' answers
(`reserve_key`), and requests for a run's driving process (`ask_pause`: a pause asked from
another process, read at each step boundary; its key is `pause_key`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from loopstate.engine.store import KeptAnswer, PauseRequest, pause_key
from loopstate.engine.stores.sqlite_errors import store_errors


class _Transaction:
    """`BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` on any error: a save is all or nothing."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


class Answers:
    """The `answers` table's side of the Store port (mixed into `SQLiteStore`)."""

    path: Path
    busy_timeout: float

    def _connect(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _transaction(self) -> _Transaction:
        return _Transaction(self._connect())

    @store_errors
    async def reserve_key(
        self, key: str, fingerprint: str, *, now: float, stale_s: float
    ) -> KeptAnswer | None:
        with self._transaction() as db:
            row = db.execute(
                "SELECT fingerprint, status, body, at FROM answers WHERE key = ?", (key,)
            ).fetchone()
            if row is not None and (row[1] is not None or row[3] > now - stale_s):
                body = None if row[2] is None else json.loads(row[2])
                return KeptAnswer(fingerprint=row[0], status=row[1], body=body, at=row[3])
            db.execute(
                "INSERT OR REPLACE INTO answers (key, fingerprint, status, body, at) "
                "VALUES (?, ?, NULL, NULL, ?)",
                (key, fingerprint, now),
            )
        return None

    @store_errors
    async def keep_answer(self, key: str, status: int, body: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE answers SET status = ?, body = ? WHERE key = ?",
                (status, json.dumps(body), key),
            )

    @store_errors
    async def drop_key(self, key: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM answers WHERE key = ?", (key,))

    @store_errors
    async def ask_pause(self, run_id: str, *, by: str, now: float) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO answers (key, fingerprint, status, body, at) "
                "VALUES (?, ?, NULL, NULL, ?)",
                (pause_key(run_id), by, now),
            )

    @store_errors
    async def pause_asked(self, run_id: str) -> PauseRequest | None:
        row = (
            self._connect()
            .execute("SELECT fingerprint, at FROM answers WHERE key = ?", (pause_key(run_id),))
            .fetchone()
        )
        return None if row is None else PauseRequest(by=row[0], at=row[1])

    @store_errors
    async def drop_pause(self, run_id: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM answers WHERE key = ?", (pause_key(run_id),))
