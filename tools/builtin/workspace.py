"""Workspace confinement: every path a tool touches resolves inside the workspace root.

Refused, each with a clear error: `..` escapes, absolute paths outside the root, symlinks
that lead outside, and anything that is not a regular file or directory (devices, FIFOs,
sockets). Files are opened with `O_NOFOLLOW` after resolution, so a symlink swapped in
between the check and the open is refused too; writes go to a temporary file that replaces
the target atomically.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from loopstate.engine.errors import LoopstateError
from loopstate.engine.tool import ToolContext


class ToolError(LoopstateError):
    """A built-in tool refused or failed; the message is written for the model to act on."""


class WorkspaceError(ToolError):
    """A path is outside the workspace, or not a regular file or directory."""


def root_of(ctx: ToolContext[Any]) -> Path:
    if ctx.workspace is None:
        raise ToolError("this agent has no workspace: create it with Agent(workspace=...)")
    root = Path(ctx.workspace).resolve(strict=True)
    if not root.is_dir():
        raise ToolError(f"the workspace {root} is not a directory")
    return root


def resolve(ctx: ToolContext[Any], path: str, *, must_exist: bool = True) -> Path:
    """`path` (relative to the workspace, or absolute inside it), fully resolved and checked."""
    root = root_of(ctx)
    if "\x00" in path:
        raise WorkspaceError("a path cannot contain NUL bytes")
    target = (root / path).resolve()  # follows every symlink that exists
    if not target.is_relative_to(root):
        raise WorkspaceError(f"{path!r} is outside the workspace")
    if not os.path.lexists(target):
        if must_exist:
            raise ToolError(f"{relative(root, target)} does not exist")
        return target
    mode = os.stat(target, follow_symlinks=False).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise WorkspaceError(f"{relative(root, target)} is not a regular file or directory")
    return target


def relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() or "."


def read_text(path: Path) -> str:
    """A regular file's text, opened without following a symlink at the last step."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise WorkspaceError(f"{path.name} is not a regular file")
        data = f.read()
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path.name} is a binary file")
    return data.decode("utf-8", errors="replace")


def write_text(path: Path, text: str) -> None:
    """Write atomically: a temporary file in the same directory replaces the target."""
    if path.is_dir():
        raise ToolError(f"{path.name} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
