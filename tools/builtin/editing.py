"""Tools that change files: write, edit, multi_edit, apply_patch. All need approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.patch import parse_patch
from loopstate.tools.builtin.workspace import (
    ToolError,
    read_text,
    relative,
    resolve,
    root_of,
    write_text,
)
from loopstate.tools.decorator import tool


@tool(needs_approval=True, category="editing")
def write(ctx: ToolContext[Any], path: str, content: str) -> str:
    """Create or overwrite a text file of the workspace.

    Args:
        path: the file, relative to the workspace
        content: the whole new content
    """
    target = resolve(ctx, path, must_exist=False)
    existed = target.exists()
    write_text(target, content)
    verb = "overwrote" if existed else "created"
    return f"{verb} {relative(root_of(ctx), target)} ({len(content)} characters)"


class Replacement(BaseModel):
    old_string: str
    new_string: str
    count: int | None = None
    """How many occurrences to replace; None means the match must be unique."""


@tool(needs_approval=True, category="editing")
def edit(
    ctx: ToolContext[Any], path: str, old_string: str, new_string: str, count: int | None = None
) -> str:
    """Replace exact text in a file: a unique match, or exactly `count` occurrences.

    Args:
        path: the file, relative to the workspace
        old_string: the exact text to find
        new_string: the text to put in its place
        count: the number of occurrences expected and replaced (omit for a unique match)
    """
    target = resolve(ctx, path)
    text = _apply(
        read_text(target), Replacement(old_string=old_string, new_string=new_string, count=count)
    )
    write_text(target, text)
    return f"edited {relative(root_of(ctx), target)}"


@tool(needs_approval=True, category="editing")
def multi_edit(ctx: ToolContext[Any], path: str, edits: list[Replacement]) -> str:
    """Apply several exact replacements to one file, in order, all or none.

    Args:
        path: the file, relative to the workspace
        edits: replacements applied one after another
    """
    target = resolve(ctx, path)
    text = read_text(target)
    for number, replacement in enumerate(edits, 1):
        try:
            text = _apply(text, replacement)
        except ToolError as exc:
            raise ToolError(f"edit {number} of {len(edits)}: {exc}; nothing was changed") from None
    write_text(target, text)
    return f"applied {len(edits)} edits to {relative(root_of(ctx), target)}"


@tool(needs_approval=True, category="editing")
def apply_patch(ctx: ToolContext[Any], patch: str) -> str:
    """Apply a unified diff to the workspace, all files or none.

    Args:
        patch: a unified diff (`--- a/x`, `+++ b/x`, `@@` hunks); /dev/null creates or deletes
    """
    root = root_of(ctx)
    planned: list[tuple[Path, str | None]] = []
    for change in parse_patch(patch):
        path = resolve(ctx, change.path, must_exist=not change.creates)
        if change.creates and path.exists():
            raise ToolError(f"{change.path} already exists; the patch creates it")
        before = "" if change.creates else read_text(path)
        planned.append((path, change.apply(before)))
    for path, text in planned:  # every hunk applied in memory first: now write them all
        if text is None:
            path.unlink()
        else:
            write_text(path, text)
    return "patched " + ", ".join(relative(root, p) for p, _ in planned)


def _apply(text: str, replacement: Replacement) -> str:
    if not replacement.old_string:
        raise ToolError("old_string is empty")
    found = text.count(replacement.old_string)
    expected = replacement.count
    if found == 0:
        raise ToolError("old_string was not found")
    if expected is None and found != 1:
        raise ToolError(f"old_string matches {found} times; make it unique or pass count")
    if expected is not None and found != expected:
        raise ToolError(f"old_string matches {found} times, not {expected}")
    return text.replace(replacement.old_string, replacement.new_string)
