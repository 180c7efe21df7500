"""Reading and listing tools: read, list_dir, glob, grep. None of them asks for approval."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.workspace import (
    ToolError,
    WorkspaceError,
    read_text,
    relative,
    resolve,
    root_of,
)
from loopstate.tools.decorator import tool

MAX_LISTED = 500


@tool(category="read_only", idempotent=True)
def read(ctx: ToolContext[Any], path: str, offset: int = 1, limit: int = 2000) -> str:
    """Read a text file of the workspace, with line numbers.

    Args:
        path: the file, relative to the workspace
        offset: first line to show (1-based)
        limit: at most this many lines
    """
    lines = read_text(_file(ctx, path)).splitlines()
    start = max(offset, 1) - 1
    shown = lines[start : start + max(limit, 0)]
    body = "\n".join(f"{start + i + 1:>6}\t{line}" for i, line in enumerate(shown))
    rest = len(lines) - start - len(shown)
    return body + (
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
    names = [p.name + ("/" if p.is_dir() else "") for p in entries]
    return _capped(names) if names else "(empty)"


@tool(category="read_only", idempotent=True)
def glob(ctx: ToolContext[Any], pattern: str) -> str:
    """Find files of the workspace by glob pattern, e.g. '**/*.py'.

    Args:
        pattern: a glob pattern relative to the workspace
    """
    root = root_of(ctx)
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise WorkspaceError(f"{pattern!r} reaches outside the workspace")
    found = sorted(
        relative(root, p) for p in root.glob(pattern) if _inside(root, p) and p.is_file()
    )
    return _capped(found) if found else "no files match"


@tool(category="read_only", idempotent=True)
def grep(ctx: ToolContext[Any], pattern: str, include: str = "**/*", max_results: int = 100) -> str:
    """Search text files of the workspace for a regular expression.

    Args:
        pattern: a Python regular expression
        include: a glob pattern selecting the files to search
        max_results: at most this many matching lines
    """
    root = root_of(ctx)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None
    hits: list[str] = []
    for path in sorted(root.glob(include)):
        if not (path.is_file() and _inside(root, path)):
            continue
        try:
            text = read_text(path)
        except (ToolError, OSError):
            continue  # binary or unreadable files are not searched
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{relative(root, path)}:{number}: {line}")
                if len(hits) >= max_results:
                    return "\n".join(hits) + f"\n[stopped at {max_results} matches]"
    return "\n".join(hits) if hits else "no matches"


def _file(ctx: ToolContext[Any], path: str) -> Path:
    target = resolve(ctx, path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory: use list_dir")
    return target


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root)


def _capped(names: list[str]) -> str:
    if len(names) <= MAX_LISTED:
        return "\n".join(names)
    return "\n".join(names[:MAX_LISTED]) + f"\n[{len(names) - MAX_LISTED} more not shown]"
