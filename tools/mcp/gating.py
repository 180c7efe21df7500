"""What an MCP tool's annotations say about approval and idempotency, and what the user's own
`needs_approval` says instead (it wins)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from mcp.types import Tool as MCPToolInfo
from mcp.types import ToolAnnotations

from loopstate.engine.approval import Gate

ApprovalOverrides = Mapping[str, bool]
"""The user's word on approval by the server's tool name or a shell-style pattern
(`{"read_*": False, "delete_file": True}`): it wins over the annotations."""


def annotations_of(info: MCPToolInfo) -> dict[str, Any]:
    """The tool's annotations as the server sent them (wire names, only those it set)."""
    if info.annotations is None:
        return {}
    return info.annotations.model_dump(by_alias=True, exclude_none=True)


def needs_approval(info: MCPToolInfo, overrides: ApprovalOverrides) -> tuple[bool, str]:
    """Whether calls of `info` wait for a decision, and why (for the reviewer).

    The user's `overrides` first (first matching key in order); then the annotations: a tool
    that is not `readOnlyHint`, or says `destructiveHint` or `openWorldHint`, needs approval.
    Annotations are hints from the server: trust them only as far as you trust the server."""
    for pattern, verdict in overrides.items():
        if fnmatch.fnmatchcase(info.name, pattern):
            return verdict, f"needs_approval[{pattern!r}]"
    hints = info.annotations or ToolAnnotations()
    said = []
    if hints.destructive_hint:
        said.append("destructive")
    elif not hints.read_only_hint:
        said.append("not read-only")
    if hints.open_world_hint:
        said.append("open world")
    return bool(said), ", ".join(said) or "read-only"


def gate(server: str, info: MCPToolInfo, name: str, why: str) -> Gate:
    """The approval request's description (the reviewer's `reason`: CLI, inbox card) and its
    metadata: the server, the tool's own name and its annotations."""
    hints = annotations_of(info)
    said = f"as {why} says" if why.startswith("needs_approval") else f"its server says {why}"
    shown = ", ".join(f"{k}={v}" for k, v in hints.items()) or "none"
    return Gate(
        description=f"{name} needs approval, {said} (MCP server {server!r}; annotations: {shown})",
        metadata={"mcp": {"server": server, "tool": info.name, "annotations": hints}},
    )


def idempotent(info: MCPToolInfo) -> bool:
    """`idempotentHint`: a call a crash interrupted may run again."""
    return bool(info.annotations and info.annotations.idempotent_hint)
