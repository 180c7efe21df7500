"""The SQLite store's tables and their versioned migrations (`PRAGMA user_version`): a file
is migrated up to `DB_VERSION` on first use; a file a newer loopstate migrated is refused."""

from __future__ import annotations

DB_VERSION = 7

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: runs, append-only messages and transitions, upserted calls
        """CREATE TABLE IF NOT EXISTS runs (
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
        )""",
        "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status)",
        """CREATE TABLE IF NOT EXISTS messages (
            run_id TEXT NOT NULL, idx INTEGER NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (run_id, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS transitions (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS calls (
            run_id TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (run_id, position)
        )""",
    ),
    (  # 2: `ready` (see `store.ready`), kept at every save so `claim` is an index scan
        "ALTER TABLE runs ADD COLUMN ready INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX runs_ready ON runs (updated_at) WHERE ready = 1",
    ),
    (  # 3: the store-wide event log, idempotency keys' answers, pages of runs by cursor
        # AUTOINCREMENT: an id is never used twice, even once old entries are pruned. Ids are
        # assigned inside `BEGIN IMMEDIATE`, under the file's one write lock held until
        # COMMIT: a transaction that got id n committed before any other could get n + 1.
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, body TEXT NOT NULL
        )""",
        """CREATE TABLE answers (
            key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER, body TEXT,
            at REAL NOT NULL
        )""",
        "CREATE INDEX runs_by_updated ON runs (updated_at, run_id)",
        "CREATE INDEX runs_by_created ON runs (created_at, run_id)",
    ),
    (  # 4: where the pruned log ends (ids are never reused: AUTOINCREMENT)
        "CREATE TABLE pruned (upto INTEGER NOT NULL)",
        "INSERT INTO pruned (upto) VALUES (0)",
    ),
    (  # 5: run definitions, each kept once by fingerprint (runs name theirs in the header)
        "CREATE TABLE IF NOT EXISTS definitions (fingerprint TEXT PRIMARY KEY, body TEXT NOT NULL)",
    ),
    (  # 6: the stream clients' cursors of every service process (pruning keeps what they need)
        """CREATE TABLE IF NOT EXISTS cursors (
            process TEXT PRIMARY KEY, after INTEGER NOT NULL, until REAL NOT NULL
        )""",
    ),
    (  # 7: each run's write count (`RunState.revision`): a save from an older copy is refused
        "ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0",
    ),
)
