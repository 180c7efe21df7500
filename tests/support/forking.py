"""Child Python processes without their start-up cost: `Popen` and `run`, as in `subprocess`.

A test that starts `python -m loopstate ...` or `python script.py ...` pays seconds of CPU in
each child to import litellm and loopstate again. These drop-in replacements for
`subprocess.Popen` and `subprocess.run` have such a child forked by a server that imported
them once (`forkserver.py`, one per test process, started on first use). The child is still a
real process: its own pid, signals, SIGKILL, exit status, pipes; only its imports are done.

A command the server cannot run as a fresh interpreter would (another program, `-c` (used to
look at a fresh interpreter's imports), interpreter options, `pass_fds`, `preexec_fn`,
another LITELLM_* or PYTHON* setting than the server imported with) starts as a real
process, exactly as `subprocess` does. `FORKING_LOG=FILE` lists those in FILE, with why.

(`Popen` overrides `subprocess.Popen`'s private `_execute_child`, `_try_wait` and
`_internal_poll`: the one place pipes are wired to a new process and the two places its exit
status is read. Everything else, pipes, text, timeouts, `communicate`, is subprocess's own.)
"""

from __future__ import annotations

import atexit
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("forkserver.py")
SERVER_ENV = dict(os.environ)
"""The environment the server imports with: this process's, before any test changes it."""

FREE = ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONWARNINGS")
"""PYTHON* variables a forked child honours (PYTHONWARNINGS as bare actions: "ignore",
"error"); any other change of PYTHON* or LITELLM* needs a fresh interpreter (they act at
start-up or import)."""
ACTIONS = {"default", "error", "ignore", "always", "module", "once"}
IMPORT_DEFAULTS = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""What loopstate sets, when unset, before it imports litellm (`_import_litellm`): the server
imported with it, and so would a fresh child. A test process that imported litellm itself has
it in its environment from then on; its children are still the server's."""


class Popen(subprocess.Popen[Any]):
    """`subprocess.Popen`, with `python -m module ...` and `python script ...` forked."""

    _forked: socket.socket | None = None

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: bool,
                       pass_fds: Any, cwd: Any, env: Any, startupinfo: Any, creationflags: int,
                       shell: bool, p2cread: int, p2cwrite: int, c2pread: int, c2pwrite: int,
                       errread: int, errwrite: int, restore_signals: bool, gid: Any, gids: Any,
                       uid: Any, umask: int, start_new_session: bool,
                       process_group: int) -> None:  # fmt: skip
        environ = dict(os.environ if env is None else env)
        plain = (preexec_fn is None and not pass_fds and not shell and executable is None
                 and gid is None and gids is None and uid is None and umask < 0
                 and process_group == -1)  # fmt: skip
        argv = _forkable(args, environ) if plain else _fallback(args, "a process option")
        if argv is None:
            super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                restore_signals, gid, gids, uid, umask, start_new_session,
                process_group)  # fmt: skip
            return
        stdio = [fd if fd != -1 else default for fd, default in ((p2cread, 0), (c2pwrite, 1),
                                                                 (errwrite, 2))]  # fmt: skip
        request = {"argv": argv, "cwd": os.fspath(cwd or os.getcwd()), "env": environ,
                   "new_session": bool(start_new_session)}  # fmt: skip
        self._forked = _server().fork(request, stdio)
        self.pid = int(_line(self._forked))
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _status(self, pid: int, flags: int) -> tuple[int, int]:
        """`os.waitpid` for a forked child: its status comes from the server."""
        assert self._forked is not None
        if flags & os.WNOHANG and not select.select([self._forked], [], [], 0)[0]:
            return 0, 0
        status = int(_line(self._forked))
        self._forked.close()
        return pid, status

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if self._forked is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc,no-any-return]
        return self._status(self.pid, wait_flags)

    def _internal_poll(self, _deadstate: int | None = None, **_: Any) -> int | None:
        if self._forked is None:
            return super()._internal_poll(_deadstate)  # type: ignore[misc,no-any-return]
        return super()._internal_poll(_deadstate, _waitpid=self._status)  # type: ignore[misc,no-any-return]


def run(
    args: Any,
    *,
    input: Any = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run`, its child started by `Popen` above."""
    if input is not None:
        options["stdin"] = subprocess.PIPE
    if capture_output:
        options["stdout"] = options["stderr"] = subprocess.PIPE
    with Popen(args, **options) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except BaseException:  # a timeout, an interrupt: the child does not outlive the call
            process.kill()
            raise
    if check and process.returncode:
        raise subprocess.CalledProcessError(process.returncode, args, stdout, stderr)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def _forkable(args: Any, env: dict[str, str]) -> list[str] | None:
    """The interpreter's arguments if the server can run this command, else None."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return _fallback(args, "a command line as one string")
    argv = [os.fspath(arg) for arg in args]
    if not argv or argv[0] != sys.executable or len(argv) < 2:
        return _fallback(args, "another program")
    if not ((argv[1] == "-m" and len(argv) > 2) or not argv[1].startswith("-")):
        return _fallback(args, f"an interpreter option {argv[1]}")
    if not set(env.get("PYTHONWARNINGS", "ignore").split(",")) <= ACTIONS:
        return _fallback(args, f"PYTHONWARNINGS={env['PYTHONWARNINGS']}")
    wanted, served = {**IMPORT_DEFAULTS, **env}, {**IMPORT_DEFAULTS, **SERVER_ENV}
    names = {name for name in {*wanted, *served} if name.startswith(("PYTHON", "LITELLM"))}
    changed = sorted(n for n in names - set(FREE) if wanted.get(n) != served.get(n))
    if changed:
        return _fallback(args, f"another {', '.join(changed)}")
    return [arg if isinstance(arg, str) else os.fsdecode(arg) for arg in argv[1:]]


def _fallback(args: Any, reason: str) -> None:
    """A command started as a real process: with FORKING_LOG=FILE, say which and why in FILE
    (one line each: the test, the reason, the command) to find the costly starts."""
    log = os.environ.get("FORKING_LOG")
    if log:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        command = args if isinstance(args, (str, bytes)) else [os.fspath(a) for a in args]
        with open(log, "a") as out:
            out.write(json.dumps({"test": test, "reason": reason, "command": str(command)[:300]}))
            out.write("\n")


def server_socket() -> str:
    """The path of this test process's fork server's socket (the server started if not yet):
    for a launcher that asks it for a child itself (`tests/forked_stdio.py`)."""
    return _server().socket


def _line(connection: socket.socket) -> str:
    """One line the server sent (a pid, a wait status): read byte by byte, nothing beyond."""
    data = b""
    while not data.endswith(b"\n"):
        part = connection.recv(1)
        if not part:
            raise ConnectionError("the fork server ended (see its output above)")
        data += part
    return data.decode()


class _Server:
    """The fork server of this test process."""

    def __init__(self) -> None:
        folder = tempfile.mkdtemp(prefix="loopstate-fork-")  # short: a socket path is ≤ 107
        self.socket = os.path.join(folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), self.socket], env=SERVER_ENV, cwd=folder,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        said = self.process.stdout.readline()  # it has imported everything
        if said != "ready\n":
            raise RuntimeError(f"the fork server did not start: {said!r}")

    def fork(self, request: dict[str, Any], stdio: list[int]) -> socket.socket:
        body = json.dumps(request).encode()
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.socket)
        socket.send_fds(connection, [len(body).to_bytes(8, "big")], stdio)
        connection.sendall(body)
        return connection


_lock = threading.Lock()
_started: list[_Server] = []


def _server() -> _Server:
    with _lock:
        if not _started:
            _started.append(_Server())
            atexit.register(_stop)
        return _started[0]


def _stop() -> None:
    """Stop the server and wait for it: its children's CPU time is counted as this process's
    own children's (`time`), as theirs would be had they been started here."""
    for server in _started:
        assert server.process.stdin is not None
        assert server.process.stdout is not None
        server.process.stdin.close()
        server.process.wait()
        server.process.stdout.close()
