"""A counting proxy in front of PostgreSQL, for the tests and the benchmark: it forwards bytes
both ways unchanged and reads the client's side of the wire protocol to count round trips.

A round trip is a client message that makes the server answer and the client wait: `Sync`
(the end of an extended-protocol exchange: a parameterized statement, a pipeline) or `Query`
(a simple-protocol statement). Start-up and TLS negotiation are not counted.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

UNTYPED = {80877103, 80877104}  # SSLRequest, GSSENCRequest: answered by one byte, no type
ROUND_TRIPS = {ord("S"), ord("Q")}


class Wire:
    """The round trips every connection through the proxy made so far."""

    def __init__(self) -> None:
        self.round_trips = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:
            self.round_trips += 1


async def _client_side(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire: Wire
) -> None:
    started = False
    try:
        while True:
            if not started:  # length-prefixed, no type byte, until the StartupMessage
                head = await reader.readexactly(8)
                size, code = struct.unpack("!ii", head)
                writer.write(head + await reader.readexactly(size - 8))
                started = code not in UNTYPED
            else:
                head = await reader.readexactly(5)
                kind, size = head[0], struct.unpack("!i", head[1:])[0]
                writer.write(head + await reader.readexactly(size - 4))
                if kind in ROUND_TRIPS:
                    wire.count()
                if kind == ord("X"):  # Terminate
                    break
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _server_side(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


class _Proxy:
    """The proxy's event loop, in a thread of its own; every connection it relays."""

    def __init__(self, host: str, port: int, wire: Wire) -> None:
        self.target, self.wire = (host, port), wire
        self.loop = asyncio.new_event_loop()
        self.tasks: set[asyncio.Task[None]] = set()
        self.writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
            self.writers |= {client_w, server_w}
            await asyncio.gather(
                _client_side(client_r, server_w, self.wire), _server_side(server_r, client_w)
            )
        except asyncio.CancelledError:
            pass  # the proxy stops: its connections end with it
        finally:
            self.tasks.discard(task)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()
        for writer in self.writers:
            writer.close()
        for task in self.tasks:
            task.cancel()
        self.loop.run_until_complete(
            asyncio.gather(server.wait_closed(), *self.tasks, return_exceptions=True)
        )
        self.loop.close()

    def start(self) -> int:
        self._thread.start()
        self._ready.wait()
        return self.port

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@contextmanager
def counting_proxy(dsn: str) -> Iterator[tuple[str, Wire]]:
    """A DSN like `dsn` (a `postgresql://host:port/...` URL) that goes through a proxy on
    127.0.0.1 and a free port, and the `Wire` counting its round trips."""
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    wire = Wire()
    proxy = _Proxy(host, port, wire)
    bound = proxy.start()
    netloc = parts.netloc.replace(f"{host}:{port}", f"127.0.0.1:{bound}")
    query = "&".join(q for q in (parts.query, "sslmode=disable") if q)
    try:
        yield urlunsplit(parts._replace(netloc=netloc, query=query)), wire
    finally:
        proxy.stop()
