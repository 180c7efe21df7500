"""The `loopstate` command for tests: in this process (`loopstate.cli.main(argv)` with its
output captured: milliseconds), or as a real process where the process boundary is the point.

Both return a `subprocess.CompletedProcess[str]` (`returncode`, `stdout`, `stderr`), so a test
reads them the same way. In this process the command runs in `cwd` with `env` set and stdin
read from `stdin`; afterwards the working directory, `sys.path`, the environment and the
modules it imported from the project (an `--agent module:attr`) are as they were, so the next
command imports the project's files afresh, as a new process would.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from loopstate.cli import main

from . import forking

Env = Mapping[str, str | None]
"""Variables to set for the command; `None` unsets one."""


def loopstate(
    *args: str, cwd: Path, stdin: str | None = None, env: Env | None = None
) -> subprocess.CompletedProcess[str]:
    """`loopstate ARGS` run in this process, its exit code and output captured."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(args, cwd, stdin, env or {})
    # Called from an async test: the command runs its own event loop, so in a thread of its
    # own (the test's loop waits, as it would for a child process).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_run, args, cwd, stdin, env or {}).result()


def loopstate_process(
    *args: str, cwd: Path, stdin: str | None = None, env: Env | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`python -m loopstate ARGS` as a real process (forked ready-imported: `support.forking`)."""
    environ = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return forking.run([sys.executable, "-m", "loopstate", *args], input=stdin, cwd=cwd,
                          env=environ, capture_output=True, text=True, timeout=timeout)  # fmt: skip


def _run(
    args: tuple[str, ...], cwd: Path, stdin: str | None, env: Env
) -> subprocess.CompletedProcess[str]:
    out, err = _pipe(), _pipe()
    with _isolated(Path(cwd), env), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err), _stdin(stdin):  # fmt: skip
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse: --help, --version, usage errors
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
        out.flush()
        err.flush()
    return subprocess.CompletedProcess(["loopstate", *args], code, _text(out), _text(err))


def _pipe() -> io.TextIOWrapper:
    """A text stream with a byte buffer under it, as a real pipe is (`sys.stdout.buffer`)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")


def _text(stream: io.TextIOWrapper) -> str:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _stdin(text: str | None) -> Iterator[None]:
    previous = sys.stdin
    sys.stdin = io.StringIO(text or "")  # no input: end of file at once, as with a closed pipe
    try:
        yield
    finally:
        sys.stdin = previous


@contextlib.contextmanager
def _isolated(cwd: Path, env: Env) -> Iterator[None]:
    """Run in `cwd` with `env`; restore the directory, `sys.path`, the environment and forget
    the modules imported from the project, whatever the command did."""
    directory, path = os.getcwd(), list(sys.path)
    saved = {name: os.environ.get(name) for name in env}
    before = set(sys.modules)
    _set_env(env)
    os.chdir(cwd)
    sys.path.insert(0, os.getcwd())  # as `python -m loopstate` has it
    importlib.invalidate_caches()  # files a test just wrote are importable
    try:
        yield
    finally:
        os.chdir(directory)
        sys.path[:] = path
        _set_env(saved)
        project = str(cwd.resolve())
        for name in set(sys.modules) - before:
            file = getattr(sys.modules[name], "__file__", None) or ""
            if file.startswith(project) and name.partition(".")[0] != "loopstate":
                del sys.modules[name]


def _set_env(env: Env) -> None:
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
