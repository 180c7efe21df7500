"""A throwaway PostgreSQL server for the tests and the benchmark: `initdb` + `pg_ctl start` in a
temporary directory, on 127.0.0.1 and a free port, as the `postgres` user when run as root
(the server refuses to run as root). `bash scripts/setup` installs PostgreSQL."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

FAST = "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"
MISSING = "PostgreSQL is not installed (no initdb/pg_ctl): run `bash scripts/setup`"


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return Path(versions[0]).parent if versions else None


@contextmanager
def postgres_server(*, settings: str = FAST) -> Iterator[str]:
    """Start a server, yield the DSN of its `postgres` database, stop and delete it.
    `settings`: server options (by default fsync off: tests never survive a power cut)."""
    root = Path(tempfile.mkdtemp(prefix="loopstate-pg-"))
    try:
        yield start_server(root, settings=settings)
    finally:
        stop_server(root)


def start_server(root: Path, *, settings: str = FAST) -> str:
    """Start a server with its files in the empty folder `root`; the DSN of its `postgres`
    database. The server runs on its own (`pg_ctl` starts it apart from this process) until
    `stop_server(root)`."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError(MISSING)
    data, port = root / "data", _free_port()
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=400"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    subprocess.run(
        [*_as_user(), str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
         "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [*_pg_ctl(root), "-l", str(root / "log"), "-w", "-t", "60", "-o", f"{options} {settings}",
         "start"],
        check=True, capture_output=True,
    )  # fmt: skip
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def stop_server(root: Path) -> None:
    """Stop the server of `root` (at once: its data is thrown away) and delete its files."""
    if binaries() is not None and (root / "data").exists():
        subprocess.run([*_pg_ctl(root), "-m", "immediate", "stop"], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def _as_user() -> list[str]:
    """The server refuses to run as root: as root, its commands run as `postgres`."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _pg_ctl(root: Path) -> list[str]:
    bin_dir = binaries()
    assert bin_dir is not None
    return [*_as_user(), str(bin_dir / "pg_ctl"), "-D", str(root / "data")]


def fresh_database(dsn: str) -> str:
    """A DSN of a new, empty database of the server at `dsn` (one per test process sharing a
    server: NOTIFY and advisory locks stay within a database)."""
    name = f"d_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return f"{dsn.rsplit('/', 1)[0]}/{name}"


def fresh_schema(dsn: str) -> str:
    """A DSN whose tables go to a new, empty schema of the server at `dsn`."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {name}")
    return f"{dsn}?options=-csearch_path%3D{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
