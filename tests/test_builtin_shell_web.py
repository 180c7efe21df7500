"""`bash` with real subprocesses and `web_fetch` against a server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate.tools.builtin import ToolError, bash, web_fetch


async def test_bash_runs_in_the_workspace_and_reports_the_exit_code(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    out = await invoke(bash, tmp_path, command="ls; pwd; exit 3")
    assert out.splitlines() == ["exit code 3", "marker.txt", str(tmp_path.resolve())]


async def test_the_command_reaches_bash_as_one_argument_unchanged(tmp_path: Path) -> None:
    # Were the library to wrap the command in another shell string, the unbalanced quotes
    # and the expansions below would come out differently.
    out = await invoke(bash, tmp_path, command="""printf '%s|' "a'b" '$HOME' "$0" """)
    assert out == "exit code 0\na'b|$HOME|/bin/bash|"


async def test_a_timeout_kills_the_whole_group_even_a_child_ignoring_sigterm(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "child.pid"
    command = "bash -c 'trap \"\" TERM; echo $$ > child.pid; while true; do sleep 0.1; done' & wait"
    started = time.monotonic()
    out = await invoke(bash, tmp_path, command=command, timeout=0.5)
    assert out.startswith("timed out after 0.5 s")
    assert time.monotonic() - started < 5
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail(f"child {pid} survived the timeout")


async def test_bash_output_is_capped_with_a_note(tmp_path: Path) -> None:
    out = await invoke(bash, tmp_path, command="head -c 100000 /dev/zero | tr '\\0' x")
    assert out.endswith("[output truncated: 30000 of 100000 bytes shown]")
    assert len(out) < 30_100


class Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/hang":
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.end_headers()
            self.wfile.write(b"start")
            self.wfile.flush()
            time.sleep(3)
            return
        body = b"hello web" if self.path == "/small" else b"y" * 500_000
        self.send_response(200)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_web_fetch_returns_the_text(site: str, tmp_path: Path) -> None:
    assert await invoke(web_fetch, tmp_path, url=f"{site}/small") == "HTTP 200\nhello web"


async def test_web_fetch_stops_at_the_size_limit(site: str, tmp_path: Path) -> None:
    out = await invoke(web_fetch, tmp_path, url=f"{site}/big", max_bytes=1000)
    assert out == "HTTP 200\n" + "y" * 1000 + "\n[truncated at 1000 bytes]"


async def test_web_fetch_gives_up_on_a_response_that_never_finishes(
    site: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"did not answer within 0\.5 s"):
        await invoke(web_fetch, tmp_path, url=f"{site}/hang", timeout=0.5)
    assert time.monotonic() - started < 2.5


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://x"])
async def test_web_fetch_refuses_schemes_other_than_http(url: str, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="only http and https"):
        await invoke(web_fetch, tmp_path, url=url)


async def test_web_fetch_reports_a_refused_connection(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ToolError, match=r"fetching .* failed"):
        await invoke(web_fetch, tmp_path, url=f"http://127.0.0.1:{port}/")
