"""The run's one PostgreSQL server and one Temporal dev server, shared by its test processes.

A server costs CPU to start (`initdb`, the dev server's start) and while it idles; each of
pytest-xdist's workers (`scripts/test`) would start its own. Instead the first test process
that needs one starts it, under a file lock, and writes its address in the run's folder of
servers; the others read it there. The controller (the workers' parent) makes that folder and
hands it to its workers (`pytest_configure_node`); at the end of the run it stops every server
recorded there (`close_run`, a cleanup of its configuration). A server runs apart from the
worker that started it (another worker may still use it when that one is done). Without xdist
the one pytest process is both.

Tests stay apart on a shared server: a database per test process and a schema per test
(PostgreSQL, `postgres_server.py`), a task queue and workflow ids of their own (Temporal).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

HANDED = "loopstate_servers"
"""The key of the folder's path in a worker's `workerinput`."""
_FOLDER = pytest.StashKey[Path]()
_ENV = dict(os.environ)
"""The environment a server starts with: this process's before any test changes it."""
STARTUP_S = 120.0
"""How long a server may take to listen: a margin for a starved machine."""


def open_run(config: pytest.Config) -> None:
    """In the controller (or a run without xdist): make the run's folder of servers, to be
    closed at the end (a cleanup: it runs even when a plugin's `pytest_unconfigure` fails)."""
    if not hasattr(config, "workerinput"):
        folder = config.stash[_FOLDER] = Path(tempfile.mkdtemp(prefix="loopstate-servers-"))
        config.add_cleanup(lambda: close_run(folder))


def hand_to(config: pytest.Config, workerinput: dict[str, object]) -> None:
    """Tell a worker about to start where the run's servers are recorded."""
    workerinput[HANDED] = str(config.stash[_FOLDER])


def shared(config: pytest.Config, name: str) -> str:
    """The address of the run's `name` server ("postgres", "temporal"), started on first use."""
    workerinput: dict[str, str] | None = getattr(config, "workerinput", None)
    folder = Path(workerinput[HANDED]) if workerinput else config.stash[_FOLDER]
    start, _ = KINDS[name]
    recorded, failed = folder / f"{name}.address", folder / f"{name}.failed"
    with FileLock(folder / f"{name}.lock"):
        if failed.exists():  # once is enough: each test needing it fails with the reason
            raise RuntimeError(failed.read_text())
        if not recorded.exists():
            (folder / name).mkdir()
            try:
                recorded.write_text(start(folder / name))
            except Exception as error:
                failed.write_text(f"the run's {name} server did not start: {error}")
                raise
        return recorded.read_text()


def close_run(folder: Path) -> None:
    """Stop every server the run started, delete its folder."""
    for name, (_, stop) in KINDS.items():
        if (folder / name).exists():
            stop(folder / name)
    shutil.rmtree(folder, ignore_errors=True)


def _start_postgres(folder: Path) -> str:
    from postgres_server import start_server

    root = Path(tempfile.mkdtemp(prefix="loopstate-pg-"))  # the `postgres` user reaches it
    (folder / "root").write_text(str(root))
    return start_server(root)


def _stop_postgres(folder: Path) -> None:
    from postgres_server import stop_server

    if (folder / "root").exists():
        stop_server(Path((folder / "root").read_text()))


def _start_temporal(folder: Path) -> str:
    """Spawn a dev server (not a `Popen` of this process: it outlives it), wait till it listens."""
    from loopstate.temporal.devserver import dev_server_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = dev_server_command(port)
    log = folder / "log"
    pid = os.posix_spawn(
        command[0], command, _ENV,
        file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                      (os.POSIX_SPAWN_OPEN, 2, str(log), os.O_WRONLY | os.O_CREAT, 0o600)],
        setsid=True,
    )  # fmt: skip
    (folder / "pid").write_text(str(pid))
    _wait_listening(port, pid, log)
    return f"127.0.0.1:{port}"


def _wait_listening(port: int, pid: int, log: Path) -> None:
    """Until the server accepts a connection; a server that ended says why (its log)."""
    ended = os.pidfd_open(pid)
    try:
        for _ in range(int(STARTUP_S / 0.05)):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return
            if select.select([ended], [], [], 0.05)[0]:  # it ended: readable
                raise RuntimeError(f"the Temporal dev server ended: {log.read_text()[-500:]}")
    finally:
        os.close(ended)
    raise RuntimeError(f"the Temporal dev server did not listen on {port} in {STARTUP_S} s")


def _stop_temporal(folder: Path) -> None:
    """SIGTERM, and wait till it has ended (SIGKILL after 10 s)."""
    if not (folder / "pid").exists():
        return
    pid = int((folder / "pid").read_text())
    try:
        ended = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        os.kill(pid, signal.SIGTERM)
        if not select.select([ended], [], [], 10)[0]:
            os.kill(pid, signal.SIGKILL)
            select.select([ended], [], [], 10)
    finally:
        os.close(ended)
    with contextlib.suppress(ChildProcessError):  # ours to reap when started here (no xdist)
        os.waitpid(pid, 0)


KINDS: dict[str, tuple[Callable[[Path], str], Callable[[Path], None]]] = {
    "postgres": (_start_postgres, _stop_postgres),
    "temporal": (_start_temporal, _stop_temporal),
}
"""Each kind of server: start (in its folder, returning its address) and stop."""
