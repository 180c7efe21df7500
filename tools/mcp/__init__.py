"""MCP servers' tools under loopstate's control (the `loopstate[mcp]` extra, on the official
`mcp` SDK): `MCPServer.stdio(...)` / `MCPServer.http(...)` go in an agent's `tools=` like any
tools; annotations gate them unless your rules say otherwise; a server's question during a
call (elicitation) is a durable wait, answered like an external tool's call."""

from loopstate.tools.mcp.results import MCPToolError
from loopstate.tools.mcp.server import MCPServer
from loopstate.tools.mcp.tools import MCPTool

__all__ = ["MCPServer", "MCPTool", "MCPToolError"]
