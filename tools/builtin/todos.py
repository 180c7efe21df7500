"""`todo_write` / `todo_read`: the run's task list, kept in the workspace so it survives resume.

The list is `.loopstate/todos/<run id>.json` under the workspace, written atomically through
the same confinement as every other file: no process-wide state, one list per run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.file_access import read_text, write_text
from loopstate.tools.builtin.workspace import ToolError, resolve_file, root_of
from loopstate.tools.decorator import tool


class Todo(BaseModel):
    """One task of the list."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, description="what to do, in a few words")
    status: Literal["pending", "in_progress", "completed"] = "pending"


def _path(ctx: ToolContext[Any]) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in ctx.run_id)
    return resolve_file(ctx, f".loopstate/todos/{safe}.json", must_exist=False)


@tool(category="read_only", idempotent=True)
def todo_read(ctx: ToolContext[Any]) -> str:
    """Show this run's task list."""
    path = _path(ctx)
    if not path.exists():
        return "no tasks yet"
    try:
        todos = [Todo.model_validate(t) for t in json.loads(read_text(root_of(ctx), path))]
    except (ValueError, TypeError, ValidationError):
        raise ToolError("the stored task list is unreadable: write it again") from None
    if not todos:
        return "no tasks"
    return "\n".join(f"{i}. [{t.status}] {t.content}" for i, t in enumerate(todos, 1))


@tool(category="editing", idempotent=True)
def todo_write(ctx: ToolContext[Any], todos: list[Todo]) -> str:
    """Replace this run's task list (send the whole list each time).

    Args:
        todos: the whole list, in order
    """
    text = json.dumps([t.model_dump() for t in todos], indent=1, ensure_ascii=False)
    write_text(root_of(ctx), _path(ctx), text)
    done = sum(t.status == "completed" for t in todos)
    return f"{len(todos)} tasks, {done} completed"
