"""Searching tools: glob (files by name) and grep (lines by regular expression); neither asks
for approval."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.file_access import read_text, split_lines
from loopstate.tools.builtin.reading import capped
from loopstate.tools.builtin.workspace import ToolError, WorkspaceError, relative, root_of
from loopstate.tools.decorator import tool

MAX_GREP_LINE_CHARS = 300
# Searched only when a pattern names them: version-control internals and loopstate's own data.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".loopstate"})


@tool(category="read_only", idempotent=True)
def glob(ctx: ToolContext[Any], pattern: str) -> str:
    """Find files of the workspace by glob pattern, e.g. '**/*.py'. Results are sorted paths
    relative to the workspace.

    Args:
        pattern: a glob pattern relative to the workspace
    """
    root = root_of(ctx)
    found = [relative(root, p) for p in _files(root, pattern)]
    return capped(found) if found else "no files match"


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
