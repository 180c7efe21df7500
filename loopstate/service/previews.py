"""What approving a built-in file tool's call will do: a unified diff of the workspace file as
it is now against what the call would leave, computed with `difflib` (the page shows it as
text). The path goes through the built-in tools' own workspace check, and the file is read
the way they read it (no link followed), so nothing outside the workspace is ever read."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopstate.engine.errors import LoopstateError
from loopstate.engine.tool import Tool, ToolContext

MAX_DIFF = 200_000
"""Characters of diff shown; beyond, it is cut with a note."""


def preview(tool: Tool, workspace: Path | None, arguments: Mapping[str, Any]) -> str | None:
    """The diff a built-in `write`, `edit`, `multi_edit` or `apply_patch` call would make,
    or a one-line note why there is none; None for any other tool."""
    from loopstate.tools.builtin import apply_patch, edit, multi_edit, write

    planners = {write.fn: _write, edit.fn: _edit, multi_edit.fn: _multi_edit,
                apply_patch.fn: _patch}  # fmt: skip
    planner = planners.get(tool.fn)
    if planner is None:
        return None
    if workspace is None:
        return "(no diff: this agent has no workspace)"
    ctx: ToolContext[None] = ToolContext(run_id="", call_id="", tool=tool.name, deps=None,
                                         workspace=workspace)  # fmt: skip
    try:
        changes = planner(ctx, arguments)
        text = "".join(_diff(before, after, name) for name, before, after in changes)
    except (LoopstateError, KeyError, TypeError, ValueError) as exc:
        return f"(no diff: {(str(exc).splitlines() or [type(exc).__name__])[0]})"
    if len(text) > MAX_DIFF:
        return text[:MAX_DIFF] + f"\n… (cut at {MAX_DIFF} characters)\n"
    return text or "(no change)"


Change = tuple[str, str, str]
"""(the file as the model named it, its text now, its text after)."""


def _diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{name}", tofile=f"b/{name}",
    )  # fmt: skip
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _current(ctx: ToolContext[None], path: str, *, must_exist: bool = True) -> tuple[str, str]:
    from loopstate.tools.builtin.file_access import read_text
    from loopstate.tools.builtin.workspace import relative, resolve_file, root_of

    root = root_of(ctx)
    target = resolve_file(ctx, path, must_exist=must_exist)
    text = read_text(root, target, strict=True) if target.exists() else ""
    return relative(root, target), text


def _write(ctx: ToolContext[None], arguments: Mapping[str, Any]) -> list[Change]:
    name, before = _current(ctx, str(arguments["path"]), must_exist=False)
    return [(name, before, str(arguments["content"]))]


def _edit(ctx: ToolContext[None], arguments: Mapping[str, Any]) -> list[Change]:
    from loopstate.tools.builtin.file_edits import Replacement, replace

    name, before = _current(ctx, str(arguments["path"]))
    change = Replacement(old_string=arguments["old_string"], new_string=arguments["new_string"],
                         count=arguments.get("count"))  # fmt: skip
    return [(name, before, replace(before, change))]


def _multi_edit(ctx: ToolContext[None], arguments: Mapping[str, Any]) -> list[Change]:
    from loopstate.tools.builtin.file_edits import Replacement, replace

    name, before = _current(ctx, str(arguments["path"]))
    after = before
    for change in arguments["edits"]:
        after = replace(after, Replacement.model_validate(change))
    return [(name, before, after)]


def _patch(ctx: ToolContext[None], arguments: Mapping[str, Any]) -> list[Change]:
    from loopstate.tools.builtin.unified_diff import parse_patch

    changes: list[Change] = []
    for change in parse_patch(str(arguments["patch"])):
        if change.source is None:
            name, _ = _current(ctx, change.path or "", must_exist=False)
            changes.append((name, "", change.apply("")))
            continue
        name, before = _current(ctx, change.source)
        changes.append((name, before, "" if change.path is None else change.apply(before)))
    return changes
