"""Built-in tools for coding and operations agents, confined to the agent's workspace.

Tools that change the world (`write`, `edit`, `multi_edit`, `apply_patch`, `bash`) need
approval by default; reading tools never ask. Toolsets by category: `read_only`, `editing`,
`shell`, `web`; `all_tools` and `registry()` hold them all. Each tool reads the workspace from
its `ToolContext` and refuses paths that leave it (see `workspace`).
"""

from loopstate.engine.tool import Tool
from loopstate.tools.builtin.editing import edit, multi_edit, write
from loopstate.tools.builtin.files import glob, grep, list_dir, read
from loopstate.tools.builtin.patching import apply_patch
from loopstate.tools.builtin.shell import bash
from loopstate.tools.builtin.todos import todo_read, todo_write
from loopstate.tools.builtin.web import web_fetch
from loopstate.tools.builtin.workspace import ToolError, WorkspaceError
from loopstate.tools.registry import ToolRegistry

read_only: list[Tool] = [read, list_dir, glob, grep, todo_read]
editing: list[Tool] = [write, edit, multi_edit, apply_patch, todo_write]
shell: list[Tool] = [bash]
web: list[Tool] = [web_fetch]
all_tools: list[Tool] = [*read_only, *editing, *shell, *web]


def registry() -> ToolRegistry:
    """A new registry of every built-in tool, selectable by name or category."""
    return ToolRegistry(all_tools)


__all__ = [
    "ToolError",
    "WorkspaceError",
    "all_tools",
    "apply_patch",
    "bash",
    "edit",
    "editing",
    "glob",
    "grep",
    "list_dir",
    "multi_edit",
    "read",
    "read_only",
    "registry",
    "shell",
    "todo_read",
    "todo_write",
    "web",
    "web_fetch",
    "write",
]
