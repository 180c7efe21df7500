"""Helpers for the service tests: a real `loopstate serve` process on 127.0.0.1, or a
`Service`'s router in a real uvicorn inside the test's own event loop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from support import forking
from support.waiting import MARGIN

TESTS = Path(__file__).parent
TOKEN = "test-token-123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def in_uvicorn(service: Any) -> AsyncIterator[str]:
    """`service`'s router (with its problem handlers) served by a real uvicorn in this event
    loop; yields its base URL, and stops the server on the way out."""
    import uvicorn
    from fastapi import FastAPI

    from loopstate.service import install_errors, service_router

    app = FastAPI(lifespan=service.lifespan)
    install_errors(app)
    app.include_router(service_router(service))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, **headers: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}", **headers}, timeout=10
        )


def start(
    db: Path | str,
    effects: Path,
    log: Path,
    port: int | None = None,
    agent: str = "service_agent:agent",
    options: tuple[str, ...] = (),
    command: tuple[str, ...] = (),
    **env: str,
) -> Server:
    """`loopstate serve` (or the script `command`, given its port), up once it answers."""
    port = port or free_port()
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "LOOPSTATE_TEST_EFFECTS": str(effects),
        "LOOPSTATE_TOKEN": TOKEN,
        **env,
    }
    args = ["-m", "loopstate", "serve", "--agent", agent, "--db", str(db), "--port", str(port)]
    with log.open("ab") as out:
        process = forking.Popen(
            [sys.executable, *(command or (*args, *options))], env=environ, stdout=out, stderr=out
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + MARGIN  # a margin for a stuck server, not a time relied on
    while True:
        try:
            with server.client() as c:
                if c.get("/api/runs").status_code == 200:
                    return server
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"loopstate serve did not start:\n{log.read_text()}")
        time.sleep(0.1)


def stop(server: Server, sig: int = signal.SIGTERM) -> None:
    server.process.send_signal(sig)
    try:
        server.process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        server.process.kill()
        raise AssertionError("loopstate serve did not stop within 60 s") from None


@contextmanager
def serving(tmp: Path, **env: str) -> Iterator[Server]:
    server = start(tmp / "runs.db", tmp / "effects.txt", tmp / "serve.log", **env)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            stop(server)


def wait_for(check: Any, *, within: float = MARGIN, every: float = 0.05) -> Any:
    """Call `check()` until it returns something truthy; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {check.__doc__ or check}")
        time.sleep(every)


@dataclass(frozen=True)
class Sse:
    id: str | None
    event: str
    data: str


def read_events(
    client: httpx.Client,
    path: str,
    count: int,
    *,
    last_event_id: str | None = None,
    until: Any = None,
    on_open: Any = None,
) -> list[Sse]:
    """The first `count` events (comments skipped) of the SSE stream at `path`, or those up
    to the one `until(event)` is true of; then the connection is closed, as a client that
    goes away would. `on_open()` is called when the stream's opening comment arrives: the
    server is following the run (or the log) for this client by then."""
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    events: list[Sse] = []
    fields: dict[str, str] = {}
    with client.stream("GET", path, headers=headers, timeout=20) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if on_open is not None and line.startswith(":"):
                on_open()
                on_open = None
            if not line:
                if "data" in fields:
                    events.append(
                        Sse(fields.get("id"), fields.get("event", "message"), fields["data"])
                    )
                    if len(events) == count or (until is not None and until(events[-1])):
                        return events
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    return events
