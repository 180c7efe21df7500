"""Searching tools: glob (files by name) and grep (lines by regular expression); neither asks
for approval.

grep uses the `regex` package, not `re`: its matcher takes a `timeout` (so a pattern that
backtracks exponentially, such as `(a+)+$`, ends with a clear error instead of never) and
releases the GIL on `str`, so the worker thread that runs this sync tool does not stall the
event loop, other runs and their timers meanwhile. (`re` does neither.) `regex` reads `re`'s
syntax. Its timeout counts the matcher's CPU time; the tool's own `timeout` bounds the wall
time the run waits.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import regex
from pydantic import Field

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.file_access import read_text, split_lines
from loopstate.tools.builtin.reading import capped
from loopstate.tools.builtin.workspace import ToolError, WorkspaceError, relative, root_of
from loopstate.tools.decorator import tool

MAX_GREP_LINE_CHARS = 300
SEARCH_S = 10.0  # one grep's time, all files together
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


@tool(category="read_only", idempotent=True, timeout=SEARCH_S + 5.0)
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
        compiled = regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except regex.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None
    search = Search(compiled, time.monotonic() + SEARCH_S)
    for path in _files(root, include):
        if search.over(root, path, max_results):
            break
    return search.result(max_results)


class Search:
    """One grep over files, with a deadline for all of it."""

    def __init__(self, pattern: regex.Pattern[str], deadline: float) -> None:
        self.pattern = pattern
        self.deadline = deadline
        self.hits: list[str] = []
        self.out_of_time = False

    def over(self, root: Path, path: Path, max_results: int) -> bool:
        """Search one file; whether the search is over (enough hits, or out of time)."""
        try:
            text = read_text(root, path)
        except (ToolError, OSError):
            return False  # binary, oversized or unreadable files are not searched
        for number, line in enumerate(split_lines(text), 1):
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.out_of_time = True
                return True
            try:  # `timeout` bounds the matcher's own work, so no pattern runs forever
                found = self.pattern.search(line, timeout=left)
            except TimeoutError:
                raise ToolError(
                    f"the pattern took over {SEARCH_S:g} s on {relative(root, path)}:{number}: "
                    "nested repetition such as (a+)+ or (a|aa)+ can take exponential time to "
                    "fail; simplify the pattern"
                ) from None
            if found:
                self.hits.append(f"{relative(root, path)}:{number}: {line[:MAX_GREP_LINE_CHARS]}")
                if len(self.hits) >= max_results:
                    return True
        return False

    def result(self, max_results: int) -> str:
        text = "\n".join(self.hits) if self.hits else "no matches"
        if self.out_of_time:
            return f"{text}\n[search stopped at its {SEARCH_S:g} s limit: narrow `include`]"
        if len(self.hits) >= max_results:
            return f"{text}\n[stopped at {max_results} matches]"
        return text


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
