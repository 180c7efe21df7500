"""Workspace confinement: every path a tool touches resolves inside the workspace root.

Refused, each with a clear error: `..` escapes, absolute paths outside the root, symlinks
(dangling ones too) that lead outside, symlink loops, and anything that is not a regular file
or directory (devices, FIFOs, sockets). `file_access` then opens the resolved path component by
component with `O_NOFOLLOW`, so a symlink swapped in after this check is refused as well.

Names are shown to the model as valid UTF-8: a byte of a file name that is not UTF-8 (Python
holds it as a lone surrogate, which no JSON or SQLite text can store) is shown as `\xff`, and
a path the model sends back with such escapes finds that file (when no file is named with
the escape literally).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from loopstate.engine.errors import LoopstateError
from loopstate.engine.tool import ToolContext


class ToolError(LoopstateError):
    """A built-in tool refused or failed; the message is written for the model to act on."""


class WorkspaceError(ToolError):
    """A path is outside the workspace, or not a regular file or directory."""


def root_of(ctx: ToolContext[Any]) -> Path:
    """The run's workspace, resolved; a clear error when the agent has none."""
    if ctx.workspace is None:
        raise ToolError("this agent has no workspace: create it with Agent(workspace=...)")
    try:
        root = Path(ctx.workspace).resolve(strict=True)
    except OSError:
        raise ToolError(f"the workspace {ctx.workspace} does not exist") from None
    if not root.is_dir():
        raise ToolError(f"the workspace {root} is not a directory")
    return root


def resolve(ctx: ToolContext[Any], path: str, *, must_exist: bool = True) -> Path:
    """`path` (relative to the workspace, or absolute inside it), fully resolved and checked."""
    root = root_of(ctx)
    if "\x00" in path:
        raise WorkspaceError("a path cannot contain NUL bytes")
    if not path.strip():
        raise ToolError("the path is empty")
    path = _named(root, path)
    try:
        target = (root / path).resolve()  # follows every symlink, dangling ones included
    except RuntimeError:  # Python 3.11 reports a symlink loop this way
        raise WorkspaceError(f"{path!r} is a symlink loop") from None
    except OSError as exc:
        raise ToolError(f"{path!r} cannot be resolved: {exc.strerror}") from None
    if not target.is_relative_to(root):
        raise WorkspaceError(f"{path!r} is outside the workspace")
    try:
        mode = os.stat(target, follow_symlinks=False).st_mode
    except FileNotFoundError:
        if must_exist:
            raise ToolError(f"{relative(root, target)} does not exist") from None
        return target
    except OSError as exc:
        raise ToolError(f"{relative(root, target)}: {exc.strerror}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise WorkspaceError(f"{relative(root, target)} is not a regular file or directory")
    return target


def resolve_file(ctx: ToolContext[Any], path: str, *, must_exist: bool = True) -> Path:
    """Like `resolve`, and refuse a directory where a file is expected."""
    target = resolve(ctx, path, must_exist=must_exist)
    if target.is_dir():
        raise ToolError(f"{relative(root_of(ctx), target)} is a directory, not a file")
    return target


def relative(root: Path, path: Path) -> str:
    """`path` as the model should see it: relative to the workspace, with forward slashes,
    as valid UTF-8 (see `shown`)."""
    return shown(path.relative_to(root).as_posix() or ".")


def shown(name: str) -> str:
    """A file name as valid UTF-8: each byte that is not UTF-8 shown as `\\xNN`."""
    try:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system gave: show its code point
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


_ESCAPED_BYTE = re.compile(rb"\\x([89a-fA-F][0-9a-fA-F])")


def _named(root: Path, path: str) -> str:
    """`path`, or the name it shows (see `shown`) when only that one exists."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:
        return path
    unescaped = os.fsdecode(_ESCAPED_BYTE.sub(lambda m: bytes([int(m[1], 16)]), raw))
    if unescaped == path or os.path.lexists(root / path):
        return path
    return unescaped if os.path.lexists(root / unescaped) else path
