"""One live session with an MCP server, held by a task of its own.

The SDK's client is an async context manager built on anyio task groups: it must be left in
the task that entered it. A run's calls come from many tasks (one per call of a batch), so the
session lives in an owner task that enters the client, hands it out, and leaves it when told
to stop. A session that failed is stopped at once (no await: a timed-out call must not wait
for a dying server) and awaited when its toolset closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from mcp import Client, ClientSession

ClientFactory = Callable[[], Client]
"""Builds the client of one session."""


class Connection:
    """A client session opened by `open`, used by any task of the loop, ended by `stop`."""

    def __init__(self, make_client: ClientFactory) -> None:
        self._make_client = make_client
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self.session: ClientSession | None = None

    async def open(self) -> ClientSession:
        """Start the owner task; the session once the server has answered the handshake."""
        self._task = asyncio.create_task(self._own(), name="loopstate-mcp-session")
        self.session = await self._ready
        return self.session

    async def _own(self) -> None:
        try:
            async with self._make_client() as client:
                self._ready.set_result(client.session)
                await self._stop.wait()
        except Exception as exc:  # a server that cannot start, or died: the caller is told
            if not self._ready.done():
                self._ready.set_exception(exc)

    def stop(self) -> None:
        """Ask the owner task to close the session (it ends the server process, for stdio)."""
        self._stop.set()

    async def close(self) -> None:
        """Stop and wait until the session is closed."""
        self.stop()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
