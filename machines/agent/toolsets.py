"""An agent's toolsets (e.g. MCP servers) around one run: their sessions held while it runs,
their tools listed into the agent the first time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

from loopstate.engine.tool import Tool, Toolset


@asynccontextmanager
async def open_toolsets(
    toolsets: Sequence[Toolset], add: Callable[[Sequence[Tool]], None] | None
) -> AsyncIterator[None]:
    """Hold every toolset's session (each opens at its first need, closes after the last run
    using it); list their tools and `add` them, unless `add` is None (already listed)."""
    async with AsyncExitStack() as stack:
        for toolset in toolsets:
            await stack.enter_async_context(toolset.session())
        if add is not None:
            add([tool for toolset in toolsets for tool in await toolset.list_tools()])
        yield
