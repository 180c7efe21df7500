"""`MCPServer`: an MCP server's tools as loopstate tools, for an `Agent` like any others.

    github = MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-github"],
                             env={"GITHUB_TOKEN": token}, namespace="github")
    agent = Agent(model, tools=[*builtins, github])

Its tools are listed (names, descriptions, JSON schemas, annotations) when a run first needs
them, gated by their annotations unless `needs_approval` says otherwise, and called over one
session per server, opened lazily and closed when the runs using it stop. A server that
crashes, hangs past `timeout` or drops the connection gives the model a tool error; the next
call starts (stdio) or connects (HTTP) anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import httpx2
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    PaginatedRequestParams,
)
from mcp.types import Tool as MCPToolInfo

from loopstate.engine.errors import DefinitionError
from loopstate.engine.tool import AskPending, Tool, ToolContext
from loopstate.tools.mcp.connection import Connection
from loopstate.tools.mcp.gating import ApprovalOverrides
from loopstate.tools.mcp.legacy import MidCallQuestions
from loopstate.tools.mcp.results import MCPToolError
from loopstate.tools.mcp.tools import build_tool, call_rounds

ServerClient = Callable[[ElicitationFnT], Client]
"""Builds a client for the server whose mid-call questions go to the given callback."""
Protocol = Literal["auto", "legacy"]
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class MCPServer:
    """A toolset from one MCP server. Build it with `MCPServer.stdio` or `MCPServer.http`.

    - `namespace`: prefix its tools' names (`namespace="github"` → `github_create_issue`;
      providers accept only letters, digits, `_` and `-` in a tool's name, so a dot is not
      used; other characters of a server's names become `_`).
    - `include` / `exclude`: keep only the tools whose server names match one of `include`'s
      names or shell-style patterns, and none of `exclude`'s.
    - `needs_approval`: your word, by name or pattern, over the annotations'
      (`{"read_*": False, "delete_*": True}`); approval rules and remembered decisions apply to
      its calls like any others.
    - `protocol`: `"auto"` speaks 2026-07-28 to a server that does and the older handshake
      to others; `"legacy"` always the older one (a server's question then comes mid-call).
    - `timeout`: seconds a call may take before the model is told it timed out (and the
      server is started anew); `connect_timeout`: seconds to start or reach the server.
    """

    def __init__(
        self,
        make_client: ServerClient,
        *,
        name: str,
        namespace: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = (),
        needs_approval: ApprovalOverrides | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 60.0,
    ) -> None:
        if timeout <= 0:
            raise DefinitionError(f"MCP server {name!r}: timeout must be positive")
        self.name = name
        self.namespace = namespace
        self.include = None if include is None else tuple(include)
        self.exclude = tuple(exclude)
        self.needs_approval: ApprovalOverrides = dict(needs_approval or {})
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._make_client = make_client
        self._questions = MidCallQuestions()
        self._connection: Connection | None = None
        self._stopped: list[Connection] = []
        self._lock = asyncio.Lock()
        self._users = 0
        self._tools: tuple[Tool, ...] | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        protocol: Protocol = "auto",
        **options: Any,
    ) -> MCPServer:
        """A server started as a subprocess that speaks MCP on its stdin and stdout (`env`:
        its environment; the SDK's default keeps only a few safe variables like PATH)."""
        params = StdioServerParameters(
            command=command, args=list(args), env=None if env is None else dict(env), cwd=cwd
        )
        return cls(
            lambda asked: Client(params, elicitation_callback=asked, mode=protocol),
            name=name or options.get("namespace") or command.rsplit("/", 1)[-1],
            **options,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        protocol: Protocol = "auto",
        **options: Any,
    ) -> MCPServer:
        """A server reached over streamable HTTP at `url` (`headers`: sent with every
        request, e.g. `{"Authorization": "Bearer ..."}`)."""

        def make_client(asked: ElicitationFnT) -> Client:
            transport = _http_transport(url, dict(headers or {}))
            return Client(transport, elicitation_callback=asked, mode=protocol)

        return cls(make_client, name=name or options.get("namespace") or url, **options)

    # -- the toolset -------------------------------------------------------------------------

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools as loopstate tools (listed once, then kept: a run's tools do not
        change under it; a process that resumes it lists them anew)."""
        if self._tools is None:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    infos = await _all_tools(await self._session())
            except Exception as exc:
                self._drop()
                error = f"the MCP server {self.name!r} could not be reached: {_said(exc)}"
                raise MCPToolError(error) from None
            self._tools = self._build(infos)
        return self._tools

    def _build(self, infos: Sequence[MCPToolInfo]) -> tuple[Tool, ...]:
        tools: dict[str, Tool] = {}
        for info in infos:
            if not self._selected(info.name):
                continue
            name = self.tool_name(info.name)
            if name in tools:
                raise DefinitionError(
                    f"MCP server {self.name!r}: two tools are named {name!r} once made safe "
                    "for providers; filter one out with exclude="
                )
            tools[name] = build_tool(self, info, name)
        return tuple(tools.values())

    def _selected(self, remote: str) -> bool:
        kept = self.include is None or any(fnmatch.fnmatchcase(remote, p) for p in self.include)
        return kept and not any(fnmatch.fnmatchcase(remote, p) for p in self.exclude)

    def tool_name(self, remote: str) -> str:
        """The name the model sees for the server's tool `remote`."""
        full = remote if self.namespace is None else f"{self.namespace}_{remote}"
        return _UNSAFE.sub("_", full)[:64]

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Keep the server's session for the runs inside (opened at the first need); closed
        when the last of them leaves."""
        self._users += 1
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                await self.aclose()

    async def aclose(self) -> None:
        """Close the session (and stop a stdio server); the next call opens one again."""
        connection, self._connection = self._connection, None
        stopped, self._stopped = self._stopped, []
        for each in (*stopped, *([connection] if connection else [])):
            await each.close()

    # -- calls -------------------------------------------------------------------------------

    async def call(self, remote: str, arguments: dict[str, Any], ctx: ToolContext[Any]) -> str:
        """Call the server's tool `remote`: its result as text, `MCPToolError` if it failed,
        `AskPending` if the server asked a question no one has answered yet."""
        try:
            async with asyncio.timeout(self.connect_timeout):
                session = await self._session()
        except Exception as exc:
            error = f"the MCP server {self.name!r} could not be reached: {_said(exc)}"
            raise MCPToolError(error) from None
        try:
            with self._questions.calling(ctx) as asking:
                async with asyncio.timeout(self.timeout):  # the call's, not the server's start
                    text = await call_rounds(session, remote, arguments, ctx)
            if asking.pending is not None:  # asked mid-call (pre-2026): its result set aside
                raise asking.pending
            return text
        except (MCPToolError, AskPending):
            raise
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                error = f"the MCP server {self.name!r} refused the call: {exc.message}"
                raise MCPToolError(error) from None
            self._drop()
            error = (
                f"the MCP server {self.name!r} closed the connection during the call (it may "
                "have crashed); it is started anew for the next call"
            )
            raise MCPToolError(error) from None
        except TimeoutError:
            self._drop()
            error = (
                f"{remote} did not answer within {self.timeout:g} s; the MCP server "
                f"{self.name!r} is started anew for the next call"
            )
            raise MCPToolError(error) from None
        except Exception as exc:
            self._drop()
            raise MCPToolError(
                f"the MCP server {self.name!r} failed during the call ({_said(exc)}); "
                "it is started anew for the next call"
            ) from None
        except BaseException:  # cancelled: the server's state is unknown
            self._drop()
            raise

    async def _session(self) -> ClientSession:
        async with self._lock:
            if self._connection is None:
                connection = Connection(lambda: self._make_client(self._questions.answer))
                try:
                    session = await connection.open()
                except BaseException:
                    await connection.close()
                    raise
                self._connection = connection
                return session
            assert self._connection.session is not None  # set by open
            return self._connection.session

    def _drop(self) -> None:
        """Stop the current session without waiting: the next call opens a new one."""
        if self._connection is not None:
            self._connection.stop()
            self._stopped.append(self._connection)
            self._connection = None


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with our headers, on an HTTP client closed with the session (the SDK
    leaves a client it was given open)."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _said(exc: BaseException) -> str:
    """An error in one line, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _all_tools(session: ClientSession) -> list[MCPToolInfo]:
    """Every tool the server lists, page after page."""
    infos: list[MCPToolInfo] = []
    params: PaginatedRequestParams | None = None
    while True:
        page = await session.list_tools(params=params)
        infos.extend(page.tools)
        if not page.next_cursor:
            return infos
        params = PaginatedRequestParams(cursor=page.next_cursor)
