"""Reading tools: read (a file, with line numbers) and list_dir. Neither asks for approval."""

from __future__ import annotations

from typing import Any

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.file_access import read_text, split_lines
from loopstate.tools.builtin.workspace import (
    ToolError,
    relative,
    resolve,
    resolve_file,
    root_of,
    shown,
)
from loopstate.tools.decorator import tool

MAX_LISTED = 500
MAX_READ_CHARS = 18_000  # under the executor's 20,000 so the "read on" note is never cut
MAX_LINE_CHARS = 2_000


@tool(category="read_only", idempotent=True)
def read(ctx: ToolContext[Any], path: str, offset: int = 1, limit: int = 2000) -> str:
    """Read a text file of the workspace, with line numbers.

    Args:
        path: the file, relative to the workspace
        offset: first line to show (1-based)
        limit: at most this many lines
    """
    root = root_of(ctx)
    lines = split_lines(read_text(root, resolve_file(ctx, path)))
    if not lines:
        return "(empty file)"
    start = max(offset, 1) - 1
    if start >= len(lines):
        raise ToolError(f"offset {offset} is past the end: {path} has {len(lines)} lines")
    shown: list[str] = []
    size = 0
    for number, line in enumerate(lines[start : start + max(limit, 1)], start + 1):
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]} [line cut: {len(line) - MAX_LINE_CHARS} more chars]"
        size += len(line) + 8
        if shown and size > MAX_READ_CHARS:
            break
        shown.append(f"{number:>6}\t{line}")
    rest = len(lines) - start - len(shown)
    return "\n".join(shown) + (
        f"\n[{rest} more lines; read on with offset={start + len(shown) + 1}]" if rest > 0 else ""
    )


@tool(category="read_only", idempotent=True)
def list_dir(ctx: ToolContext[Any], path: str = ".") -> str:
    """List a directory of the workspace (directories end with '/').

    Args:
        path: the directory, relative to the workspace
    """
    root = root_of(ctx)
    directory = resolve(ctx, path)
    if not directory.is_dir():
        raise ToolError(f"{relative(root, directory)} is not a directory")
    entries = sorted(directory.iterdir(), key=lambda p: p.name)
    names = [shown(p.name) + ("/" if p.is_dir() else "") for p in entries]
    return capped(names) if names else "(empty)"


def capped(names: list[str]) -> str:
    """One name a line, at most `MAX_LISTED` of them, with a note of how many more there are."""
    if len(names) <= MAX_LISTED:
        return "\n".join(names)
    return "\n".join(names[:MAX_LISTED]) + f"\n[{len(names) - MAX_LISTED} more not shown]"
