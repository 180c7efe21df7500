"""`apply_patch`: apply a unified diff to the workspace, every file or none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.file_access import StagedWrite, read_text, remove, stage
from loopstate.tools.builtin.unified_diff import FileChange, parse_patch
from loopstate.tools.builtin.workspace import ToolError, relative, resolve_file, root_of
from loopstate.tools.decorator import tool

Plan = list[tuple[Path, str | None, str]]
"""(file, its new text or None to delete it, what happens to it)."""


@tool(needs_approval=True, category="editing")
def apply_patch(ctx: ToolContext[Any], patch: str) -> str:
    """Apply a unified diff to the workspace: every file changes, or none does.

    Args:
        patch: a unified diff (`--- a/x`, `+++ b/x`, `@@ -1,3 +1,4 @@` hunks with exact line
            counts); `--- /dev/null` creates a file, `+++ /dev/null` deletes one
    """
    root = root_of(ctx)
    plan: Plan = []
    for change in parse_patch(patch):
        plan.extend(_plan(ctx, root, change))
    touched = [path for path, _, _ in plan]
    for path in touched:
        if touched.count(path) > 1:
            raise ToolError(
                f"{relative(root, path)} appears twice in the patch: put all its hunks in one "
                "section. Nothing was changed"
            )
    _write_all(root, plan)
    return "patched: " + ", ".join(f"{what} {relative(root, path)}" for path, _, what in plan)


def _plan(ctx: ToolContext[Any], root: Path, change: FileChange) -> Plan:
    """Every hunk applied in memory; nothing is written yet."""
    if change.source is None:
        target = _new_file(ctx, root, change.path or "")
        return [(target, change.apply(""), "created")]
    source = resolve_file(ctx, change.source)
    after = change.apply(read_text(root, source, strict=True))
    if change.path is None:
        if after:
            raise ToolError(
                f"{change.source}: the patch deletes it but does not remove all of its lines; "
                "nothing was changed"
            )
        return [(source, None, "deleted")]
    if change.path == change.source:
        return [(source, after, "modified")]
    target = _new_file(ctx, root, change.path)
    return [(target, after, f"{change.source} renamed to"), (source, None, "removed")]


def _new_file(ctx: ToolContext[Any], root: Path, path: str) -> Path:
    target = resolve_file(ctx, path, must_exist=False)
    if target.exists():
        raise ToolError(f"{relative(root, target)} already exists; the patch creates it")
    return target


def _write_all(root: Path, plan: Plan) -> None:
    """Stage every new text first, then put them in place and remove deleted files: a failure
    while staging (a full disk, a swapped-in link) leaves the workspace as it was."""
    staged: list[StagedWrite] = []
    try:
        for path, text, _ in plan:
            if text is not None:
                staged.append(stage(root, path, text))
    except BaseException:
        for s in staged:
            s.discard()
        raise
    for s in staged:
        s.commit()
    for path, text, _ in plan:
        if text is None:
            remove(root, path)
