"""Tools that change files: write, edit, multi_edit. All need approval."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.file_access import read_text, write_text
from loopstate.tools.builtin.workspace import ToolError, relative, resolve_file, root_of
from loopstate.tools.decorator import tool


@tool(needs_approval=True, category="editing")
def write(ctx: ToolContext[Any], path: str, content: str) -> str:
    """Create or overwrite a text file of the workspace.

    Args:
        path: the file, relative to the workspace
        content: the whole new content
    """
    root = root_of(ctx)
    target = resolve_file(ctx, path, must_exist=False)
    existed = target.exists()
    write_text(root, target, content)
    verb = "overwrote" if existed else "created"
    return f"{verb} {relative(root, target)} ({len(content)} characters)"


class Replacement(BaseModel):
    """One exact replacement."""

    model_config = ConfigDict(extra="forbid")

    old_string: str = Field(description="the exact text to find")
    new_string: str = Field(description="the text to put in its place")
    count: int | None = Field(
        None, ge=1, description="occurrences expected and replaced; omit for a unique match"
    )


@tool(needs_approval=True, category="editing")
def edit(
    ctx: ToolContext[Any],
    path: str,
    old_string: str,
    new_string: str,
    count: Annotated[int, Field(ge=1)] | None = None,
) -> str:
    """Replace exact text in a file: a unique match, or exactly `count` occurrences.

    Args:
        path: the file, relative to the workspace
        old_string: the exact text to find
        new_string: the text to put in its place
        count: the number of occurrences expected and replaced (omit for a unique match)
    """
    root = root_of(ctx)
    target = resolve_file(ctx, path)
    change = Replacement(old_string=old_string, new_string=new_string, count=count)
    text = replace(read_text(root, target, strict=True), change)
    write_text(root, target, text)
    return f"edited {relative(root, target)}"


@tool(needs_approval=True, category="editing")
def multi_edit(
    ctx: ToolContext[Any], path: str, edits: Annotated[list[Replacement], Field(min_length=1)]
) -> str:
    """Apply several exact replacements to one file, in order, all or none.

    Args:
        path: the file, relative to the workspace
        edits: replacements applied one after another, each to the result of the previous
    """
    root = root_of(ctx)
    target = resolve_file(ctx, path)
    text = read_text(root, target, strict=True)
    for number, change in enumerate(edits, 1):
        try:
            text = replace(text, change)
        except ToolError as exc:
            raise ToolError(f"edit {number} of {len(edits)}: {exc}; nothing was changed") from None
    write_text(root, target, text)
    return f"applied {len(edits)} edits to {relative(root, target)}"


def replace(text: str, change: Replacement) -> str:
    """`text` with the replacement made, or a `ToolError` saying how the match failed."""
    if not change.old_string:
        raise ToolError("old_string is empty")
    if change.old_string == change.new_string:
        raise ToolError("old_string and new_string are the same; there is nothing to change")
    found = text.count(change.old_string)
    if found == 0:
        raise ToolError("old_string was not found (it must match exactly, whitespace included)")
    if change.count is None and found != 1:
        raise ToolError(f"old_string matches {found} times; make it unique or pass count")
    if change.count is not None and found != change.count:
        raise ToolError(f"old_string matches {found} times, not {change.count}")
    return text.replace(change.old_string, change.new_string)
