"""`todo_write` / `todo_read`: the run's task list, kept in the workspace so it survives resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.workspace import read_text, root_of, write_text
from loopstate.tools.decorator import tool


class Todo(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"


def _path(ctx: ToolContext[Any]) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in ctx.run_id)
    return root_of(ctx) / ".loopstate" / "todos" / f"{safe}.json"


@tool(category="read_only", idempotent=True)
def todo_read(ctx: ToolContext[Any]) -> str:
    """Show this run's task list."""
    path = _path(ctx)
    if not path.exists():
        return "no tasks yet"
    todos = [Todo.model_validate(t) for t in json.loads(read_text(path))]
    return "\n".join(f"{i}. [{t.status}] {t.content}" for i, t in enumerate(todos, 1))


@tool(category="editing", idempotent=True)
def todo_write(ctx: ToolContext[Any], todos: list[Todo]) -> str:
    """Replace this run's task list.

    Args:
        todos: the whole list, in order
    """
    write_text(_path(ctx), json.dumps([t.model_dump() for t in todos], indent=1))
    done = sum(t.status == "completed" for t in todos)
    return f"{len(todos)} tasks, {done} completed"
