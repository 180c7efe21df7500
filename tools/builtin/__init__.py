"""Built-in tools for coding and operations agents, confined to the agent's workspace.

Tools that change the world (`write`, `edit`, `multi_edit`, `apply_patch`, `bash`) need
approval by default; reading tools never ask. Toolsets by category: `read_only_tools`,
`editing_tools`, `shell_tools`, `web_tools`; `all_tools` and `registry()` hold them all. Each
tool reads the workspace from its `ToolContext` and refuses paths that leave it (see
`workspace`).

Modules: `reading` (read, list_dir), `searching` (glob, grep), `file_edits` (write, edit,
multi_edit), `patch_tool` (apply_patch) with its parser `unified_diff`, `bash_tool` (bash) with
`shell_supervisor` (the process that owns a command's processes), `fetch_tool` (web_fetch),
`todos`; `workspace` confines paths and `file_access` reads and writes without following
swapped-in links. No module shares a name with an attribute of this package, so each stays
importable as `loopstate.tools.builtin.<module>`.
"""

from loopstate.engine.tool import Tool
from loopstate.tools.builtin.bash_tool import bash
from loopstate.tools.builtin.fetch_tool import web_fetch
from loopstate.tools.builtin.file_edits import edit, multi_edit, write
from loopstate.tools.builtin.patch_tool import apply_patch
from loopstate.tools.builtin.reading import list_dir, read
from loopstate.tools.builtin.searching import glob, grep
from loopstate.tools.builtin.todos import todo_read, todo_write
from loopstate.tools.builtin.workspace import ToolError, WorkspaceError
from loopstate.tools.registry import ToolRegistry

read_only_tools: list[Tool] = [read, list_dir, glob, grep, todo_read]
editing_tools: list[Tool] = [write, edit, multi_edit, apply_patch, todo_write]
shell_tools: list[Tool] = [bash]
web_tools: list[Tool] = [web_fetch]
all_tools: list[Tool] = [*read_only_tools, *editing_tools, *shell_tools, *web_tools]

# The toolsets' first names, kept so existing imports work. They once hid the modules of the
# same name (`builtin.shell` was this list, not the module); those modules are renamed now.
read_only = read_only_tools
editing = editing_tools
shell = shell_tools
web = web_tools


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
    "editing_tools",
    "glob",
    "grep",
    "list_dir",
    "multi_edit",
    "read",
    "read_only",
    "read_only_tools",
    "registry",
    "shell",
    "shell_tools",
    "todo_read",
    "todo_write",
    "web",
    "web_fetch",
    "web_tools",
    "write",
]
