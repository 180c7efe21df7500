"""Reading and listing tools: read, list_dir, glob, grep. None of them asks for approval."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.fileio import read_text, split_lines
from loopstate.tools.builtin.workspace import (
    ToolError,
    WorkspaceError,
    relative,
    resolve,
    resolve_file,
    root_of,
)
from loopstate.tools.decorator import tool

MAX_LISTED = 500
MAX_READ_CHARS = 18_000  # under the executor's 20,000 so the "read on" note is never cut
MAX_LINE_CHARS = 2_000
MAX_GREP_LINE_CHARS = 300
# Searched only when a pattern names them: version-control internals and loopstate's own data.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".loopstate"})


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
    names = [p.name + ("/" if p.is_dir() else "") for p in entries]
    return _capped(names) if names else "(empty)"


@tool(category="read_only", idempotent=True)
def glob(ctx: ToolContext[Any], pattern: str) -> str:
    """Find files of the workspace by glob pattern, e.g. '**/*.py'. Results are sorted paths
    relative to the workspace.

    Args:
        pattern: a glob pattern relative to the workspace
    """
    root = root_of(ctx)
    found = [relative(root, p) for p in _files(root, pattern)]
    return _capped(found) if found else "no files match"


@tool(category="read_only", idempotent=True)
def grep(
    ctx: ToolContext[Any],
    pattern: str,
    include: str = "**/*",
    max_results: Annotated[int, Field(ge=1, le=1000)] = 100,
    ignore_case: bool = False,
) -> str:
    """Search text files of the workspace for a regular expression; prints path:line: text.

    Args:
        pattern: a Python regular expression, matched against each line
        include: a glob pattern selecting the files to search, e.g. 'src/**/*.py'
        max_results: at most this many matching lines
        ignore_case: match letters in either case
    """
    root = root_of(ctx)
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None
    hits: list[str] = []
    for path in _files(root, include):
        try:
            text = read_text(root, path)
        except (ToolError, OSError):
            continue  # binary, oversized or unreadable files are not searched
        for number, line in enumerate(split_lines(text), 1):
            if regex.search(line):
                hits.append(f"{relative(root, path)}:{number}: {line[:MAX_GREP_LINE_CHARS]}")
                if len(hits) >= max_results:
                    return "\n".join(hits) + f"\n[stopped at {max_results} matches]"
    return "\n".join(hits) if hits else "no matches"


def _files(root: Path, pattern: str) -> Iterator[Path]:
    """Regular files matching `pattern` inside the workspace, sorted."""
    parts = Path(pattern).parts
    if Path(pattern).is_absolute() or ".." in parts:
        raise WorkspaceError(f"{pattern!r} reaches outside the workspace")
    try:
        matches = sorted(root.glob(pattern))
    except ValueError as exc:
        raise ToolError(f"invalid glob pattern {pattern!r}: {exc}") from None
    named = SKIPPED_DIRS.intersection(parts)
    for path in matches:
        rel = path.relative_to(root).parts
        if SKIPPED_DIRS.intersection(rel[:-1]) - named:
            continue
        if path.is_file() and _inside(root, path):
            yield path


def _inside(root: Path, path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop is not a file of the workspace
        return False


def _capped(names: list[str]) -> str:
    if len(names) <= MAX_LISTED:
        return "\n".join(names)
    return "\n".join(names[:MAX_LISTED]) + f"\n[{len(names) - MAX_LISTED} more not shown]"
