"""`web_fetch` against a real HTTP server on 127.0.0.1: text, size cap, deadline, refusals."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from builtin_support import invoke
from pydantic import ValidationError

from loopstate.tools.builtin import ToolError, web_fetch

PAGES: dict[str, tuple[str, bytes]] = {
    "/small": ("text/plain; charset=utf-8", b"hello web"),
    "/big": ("text/plain", b"y" * 500_000),
    "/latin": ("text/html; charset=iso-8859-1", "café".encode("latin-1")),
    "/image": ("image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
}


class Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if self.path == "/trickle":  # headers at once, then a body that never ends
                self._head("text/plain")
                for _ in range(600):  # 30 s, unless the client gives up
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            if self.path == "/redirect":
                self.send_response(302)
                self.send_header("location", "/small")
                self.end_headers()
                return
            content_type, body = PAGES.get(self.path, ("text/plain", b"not found"))
            self._head(content_type, len(body), 200 if self.path in PAGES else 404)
            self.wfile.write(body)

    def _head(self, content_type: str, length: int | None = None, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        if length is not None:
            self.send_header("content-length", str(length))
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


async def test_web_fetch_returns_the_status_and_the_text(site: str, tmp_path: Path) -> None:
    assert await invoke(web_fetch, tmp_path, url=f"{site}/small") == "HTTP 200\nhello web"
    assert await invoke(web_fetch, tmp_path, url=f"{site}/nope") == "HTTP 404\nnot found"


async def test_web_fetch_follows_redirects(site: str, tmp_path: Path) -> None:
    assert await invoke(web_fetch, tmp_path, url=f"{site}/redirect") == "HTTP 200\nhello web"


async def test_web_fetch_decodes_with_the_declared_charset(site: str, tmp_path: Path) -> None:
    assert await invoke(web_fetch, tmp_path, url=f"{site}/latin") == "HTTP 200\ncafé"


async def test_web_fetch_stops_at_the_size_limit(site: str, tmp_path: Path) -> None:
    out = await invoke(web_fetch, tmp_path, url=f"{site}/big", max_bytes=1000)
    assert out == "HTTP 200\n" + "y" * 1000 + "\n[truncated at 1000 bytes]"


async def test_web_fetch_gives_up_on_a_response_that_never_finishes(
    site: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"did not answer within 0\.5 s"):
        await invoke(web_fetch, tmp_path, url=f"{site}/trickle", timeout=0.5)
    assert time.monotonic() - started < 10  # not the body's 30 s


async def test_web_fetch_refuses_binary_content(site: str, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="binary content"):
        await invoke(web_fetch, tmp_path, url=f"{site}/image")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://x", "x"])
async def test_web_fetch_refuses_schemes_other_than_http(url: str, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="only http and https"):
        await invoke(web_fetch, tmp_path, url=url)


async def test_web_fetch_reports_a_refused_connection(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ToolError, match=r"fetching .* failed: ConnectError"):
        await invoke(web_fetch, tmp_path, url=f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize(
    ("name", "value"), [("max_bytes", 0), ("max_bytes", 10**9), ("timeout", 0)]
)
def test_limits_out_of_range_are_refused(name: str, value: int) -> None:
    with pytest.raises(ValidationError):
        web_fetch.validate({"url": "http://x", name: value})
