"""Reading and writing workspace files without following a symlink swapped in after the check.

Paths come resolved and checked by `workspace.resolve`. Here they are opened again from the
root's descriptor, one component at a time with `O_NOFOLLOW`, so a directory replaced by a
symlink between the check and the use is refused instead of followed. Writes go to a
temporary file in the same directory that then replaces the target (`os.replace`), keeping
the target's permission bits; `stage` lets several files be prepared before any is replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from loopstate.tools.builtin.workspace import ToolError, WorkspaceError, relative

MAX_FILE_BYTES = 10 * 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO swapped in after the check must not hang the tool.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
T = TypeVar("T")


def read_text(root: Path, path: Path, *, strict: bool = False) -> str:
    """A regular file's text. `strict` refuses bytes that are not UTF-8 (before an edit
    rewrites the file) instead of showing them as U+FFFD."""
    data = read_bytes(root, path)
    if b"\x00" in data[:8192]:
        raise ToolError(f"{relative(root, path)} is a binary file")
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{relative(root, path)} is not UTF-8 text (byte {exc.start}); it was left unchanged"
        ) from None


def read_bytes(root: Path, path: Path) -> bytes:
    dir_fd = _open_parent(root, path, create=False)
    try:
        fd = _guard(root, path, partial(os.open, path.name, _FILE_FLAGS, dir_fd=dir_fd))
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"{relative(root, path)} is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise ToolError(
                f"{relative(root, path)} is {info.st_size} bytes, over the "
                f"{MAX_FILE_BYTES}-byte limit for files tools read"
            )
        return f.read(MAX_FILE_BYTES + 1)


def split_lines(text: str) -> list[str]:
    """Lines split at '\\n' only, as diffs and editors count them (not at form feeds or
    U+2028, which `str.splitlines` also splits at)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


@dataclass
class StagedWrite:
    """A new file content written beside its target, not yet in place."""

    dir_fd: int
    temp: str
    name: str

    def commit(self) -> None:
        try:
            os.replace(self.temp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        finally:
            os.close(self.dir_fd)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.temp, dir_fd=self.dir_fd)
        os.close(self.dir_fd)


def stage(root: Path, path: Path, text: str) -> StagedWrite:
    """Write `text` to a temporary file next to `path` (creating missing directories)."""
    dir_fd = _open_parent(root, path, create=True)
    temp = f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        mode = _existing_mode(root, path, dir_fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o666 if mode is None else mode, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)  # the umask must not narrow an existing file's mode
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        StagedWrite(dir_fd, temp, path.name).discard()
        raise
    return StagedWrite(dir_fd, temp, path.name)


def write_text(root: Path, path: Path, text: str) -> None:
    """Replace (or create) `path` with `text` atomically."""
    stage(root, path, text).commit()


def remove(root: Path, path: Path) -> None:
    dir_fd = _open_parent(root, path, create=False)
    try:
        _guard(root, path, partial(os.unlink, path.name, dir_fd=dir_fd))
    finally:
        os.close(dir_fd)


def _existing_mode(root: Path, path: Path, dir_fd: int) -> int | None:
    try:
        info = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{relative(root, path)} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{relative(root, path)} is not a regular file")
    return stat.S_IMODE(info.st_mode)


def _open_parent(root: Path, path: Path, *, create: bool) -> int:
    """A descriptor of `path`'s directory, reached from the root without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in path.parent.relative_to(root).parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            child = _guard(root, path, partial(os.open, part, _DIR_FLAGS, dir_fd=fd))
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _guard(root: Path, path: Path, action: Callable[[], T]) -> T:
    """Run one `*at` call, turning what a swapped-in link or a vanished file does into errors
    the model understands."""
    try:
        return action()
    except FileNotFoundError:
        raise ToolError(f"{relative(root, path)} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise WorkspaceError(
                f"{relative(root, path)} changed while in use (a symlink or a file appeared "
                "where a directory was); it was not touched"
            ) from None
        raise
