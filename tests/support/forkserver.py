"""A Python that has imported loopstate and litellm once and forks the tests' child processes.

Started by `support.forking` (one per test process), as `python forkserver.py SOCKET`. It
imports what the children would import (litellm alone costs seconds of CPU per process), says
`ready` on its stdout, then serves: each connection to SOCKET sends a child's command line,
working directory, environment and its stdin/stdout/stderr (as file descriptors); the server
forks, answers with the child's pid, and when the child ends sends its wait status.

The forked child is a real process of its own (its own pid; a SIGKILL kills it where it
stands), set up as a fresh interpreter would be: its stdio, directory, environment, `sys.argv`
and `sys.path`; it then runs the script or module as `__main__` and exits as Python does. The
server starts no thread and no event loop, so forking it is safe. It stops (killing any child
still running) when its stdin closes: when the test process that started it is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass

HEADER = 8
"""Bytes of the length that precedes a request's JSON (big-endian)."""

PRELOADED = (
    "loopstate",
    "loopstate.cli",
    "loopstate.engine.models.litellm",
    "loopstate.service",
    "loopstate.temporal",
    "httpx",
    "sqlite3",
)
"""What the children import; litellm itself through loopstate's own import of it."""


@dataclass(frozen=True, kw_only=True)
class Job:
    argv: list[str]
    """The interpreter's arguments: `["-m", module, ...]` or `[script, ...]`."""
    cwd: str
    env: dict[str, str]
    new_session: bool
    preload: tuple[str, ...] = ()
    """Modules the server imports (once) before it forks this child: what a kind of child
    that only some tests start imports (`forked_stdio.py`: an MCP server's SDK)."""


def main() -> None:
    base_path = _base_path()
    _preload()
    gc.freeze()  # the children's collections skip what is loaded: their pages stay shared
    job = _serve(sys.argv[1])  # returns only in a forked child
    _become(job, base_path)
    os._exit(_exit_code(job))


def _base_path() -> list[str]:
    """This interpreter's `sys.path` without this script's folder and PYTHONPATH's entries:
    the part a child shares whatever its own script and PYTHONPATH."""
    own = set(_python_path(os.environ))
    return [entry for entry in sys.path[1:] if entry not in own]


def _python_path(env: dict[str, str] | os._Environ[str]) -> list[str]:
    return [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]


def _preload() -> None:
    for name in PRELOADED:
        importlib.import_module(name)
    from loopstate.engine.models import litellm

    litellm._import_litellm()  # litellm, with loopstate's choice of a local price map


def _serve(path: str) -> Job:
    """Fork a child per request until stdin closes; in the child, return its job."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select() through the pipe
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.close(devnull)
    waiting: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([listener, wake_read, 0], [], [])
        if 0 in ready and not os.read(0, 4096):
            for pid in waiting:
                os.kill(pid, signal.SIGKILL)
            raise SystemExit(0)
        if wake_read in ready:
            while _drained(wake_read):
                pass
            _reap(waiting)
        if listener in ready:
            job = _fork(listener, waiting)
            if job is not None:
                return job


def _fork(listener: socket.socket, waiting: dict[int, socket.socket]) -> Job | None:
    """Accept a request and fork its child: the job in the child, None in the server."""
    connection, _ = listener.accept()
    job, fds = _receive(connection)
    if any(name not in sys.modules for name in job.preload):
        for name in job.preload:
            with contextlib.suppress(ImportError):  # the child says so, as its own import
                importlib.import_module(name)
        gc.freeze()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for open_socket in (listener, connection, *waiting.values()):
            open_socket.close()
        for fd, stream in zip(fds, range(3), strict=True):
            os.dup2(fd, stream)
        os.closerange(3, 1 << 16)  # the wake-up pipe, the passed fds, anything inherited
        return job
    for fd in fds:
        os.close(fd)
    connection.sendall(f"{pid}\n".encode())
    waiting[pid] = connection
    return None


def _drained(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


def _reap(waiting: dict[int, socket.socket]) -> None:
    """Send each ended child's wait status to the test process waiting for it."""
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        connection = waiting.pop(pid)
        with contextlib.suppress(OSError):  # the test process stopped waiting (it ended)
            connection.sendall(f"{status}\n".encode())
        connection.close()


def _receive(connection: socket.socket) -> tuple[Job, list[int]]:
    header, fds, _, _ = socket.recv_fds(connection, HEADER, 3)
    size = int.from_bytes(header, "big")
    body = b""
    while len(body) < size:
        part = connection.recv(size - len(body))
        if not part:
            raise ConnectionError("the request ended early")
        body += part
    fields = json.loads(body)
    return Job(**{**fields, "preload": tuple(fields.get("preload", ()))}), fds


def _become(job: Job, base_path: list[str]) -> None:
    """Make this forked process look like a fresh `python ARGV` started in `job.cwd`."""
    if job.new_session:
        os.setsid()
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.env)
    first = os.getcwd() if job.argv[0] == "-m" else os.path.dirname(os.path.abspath(job.argv[0]))
    sys.path[:] = [first, *_python_path(job.env), *base_path]
    importlib.invalidate_caches()  # files written since the server started are importable
    for action in job.env.get("PYTHONWARNINGS", "").split(","):  # the last one wins
        if action:  # bare actions only (support.forking sends no other)
            warnings.simplefilter(action)  # type: ignore[arg-type]
    sys.dont_write_bytecode = bool(job.env.get("PYTHONDONTWRITEBYTECODE"))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # as loopstate's import of
    # litellm sets it in a fresh interpreter (support.forking.IMPORT_DEFAULTS)
    unbuffered = bool(job.env.get("PYTHONUNBUFFERED"))
    # The same stream objects, now on the child's descriptors: buffered as Python would.
    sys.stdout.reconfigure(line_buffering=unbuffered or os.isatty(1), write_through=unbuffered)
    sys.stderr.reconfigure(line_buffering=True, write_through=unbuffered)


def _exit_code(job: Job) -> int:
    """Run the job and end as the interpreter does (threads joined, `atexit`, streams
    flushed); then exit at once: tearing down every module the server loaded is work a child
    started afresh would not have had."""
    try:
        _run(job)
        code = 0
    except SystemExit as exit:
        code = _code(exit.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # private, but the one way to run them before os._exit
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as Python does when it cannot flush stdout at exit
    if code == -signal.SIGINT:  # as Python does after an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _run(job: Job) -> None:
    if job.argv[0] == "-m":
        sys.argv = ["-m", *job.argv[2:]]
        runpy.run_module(job.argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(job.argv)
        runpy.run_path(job.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
