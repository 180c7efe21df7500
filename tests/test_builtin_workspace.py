"""Every path is confined to the workspace; each hostile case is refused with a clear error."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate.tools.builtin import ToolError, WorkspaceError, grep, list_dir, read, write
from loopstate.tools.builtin.file_access import read_text, write_text


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inside.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    return root


@pytest.mark.parametrize(
    "path", ["../secret.txt", "sub/../../secret.txt", "./../secret.txt", "/etc/passwd"]
)
async def test_dot_dot_and_absolute_paths_outside_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(read, ws, path=path)


async def test_an_absolute_path_outside_is_refused_for_writing(ws: Path) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(write, ws, path=str(ws.parent / "secret.txt"), content="pwned")
    assert (ws.parent / "secret.txt").read_text() == "secret\n"


async def test_an_absolute_path_inside_the_workspace_is_allowed(ws: Path) -> None:
    assert "inside" in await invoke(read, ws, path=str(ws / "inside.txt"))


async def test_a_symlink_leading_outside_is_refused_for_reading_and_writing(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(read, ws, path="link.txt")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(write, ws, path="link.txt", content="pwned")
    assert (ws.parent / "secret.txt").read_text() == "secret\n"


async def test_a_dangling_symlink_leading_outside_cannot_create_a_file_there(ws: Path) -> None:
    (ws / "dangling.txt").symlink_to(ws.parent / "created-outside.txt")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(write, ws, path="dangling.txt", content="pwned")
    assert not (ws.parent / "created-outside.txt").exists()


async def test_a_symlinked_directory_leading_outside_is_refused(ws: Path) -> None:
    (ws / "out").symlink_to(ws.parent)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(write, ws, path="out/new.txt", content="x")
    assert not (ws.parent / "new.txt").exists()


async def test_a_symlink_to_dev_zero_is_refused(ws: Path) -> None:
    (ws / "zero").symlink_to("/dev/zero")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(read, ws, path="zero")


async def test_a_symlink_loop_is_refused(ws: Path) -> None:
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(ws / "a")
    with pytest.raises(WorkspaceError, match="symlink loop"):
        await invoke(read, ws, path="a")


async def test_a_fifo_inside_the_workspace_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(WorkspaceError, match="not a regular file or directory"):
        await invoke(read, ws, path="pipe")
    with pytest.raises(WorkspaceError, match="not a regular file or directory"):
        await invoke(write, ws, path="pipe", content="x")
    assert await invoke(grep, ws, pattern="inside") == "inside.txt:1: inside"


async def test_a_unix_socket_inside_the_workspace_is_refused(ws: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(ws / "sock"))
        with pytest.raises(WorkspaceError, match="not a regular file or directory"):
            await invoke(read, ws, path="sock")


async def test_a_symlink_inside_the_workspace_to_a_file_inside_is_followed(ws: Path) -> None:
    (ws / "alias.txt").symlink_to(ws / "inside.txt")
    assert "inside" in await invoke(read, ws, path="alias.txt")
    await invoke(write, ws, path="alias.txt", content="through the alias\n")
    assert (ws / "alias.txt").is_symlink()
    assert (ws / "inside.txt").read_text() == "through the alias\n"


async def test_a_directory_where_a_file_is_expected_is_refused(ws: Path) -> None:
    (ws / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await invoke(read, ws, path="dir")
    with pytest.raises(ToolError, match="is a directory"):
        await invoke(write, ws, path="dir", content="x")


def test_a_directory_swapped_for_an_outside_symlink_after_the_check_is_not_followed(
    ws: Path,
) -> None:
    (ws / "sub").mkdir()
    checked = ws.resolve() / "sub" / "new.txt"  # what `resolve` approved
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(ws.parent)  # swapped before the write
    with pytest.raises(WorkspaceError, match="changed while in use"):
        write_text(ws.resolve(), checked, "pwned")
    assert not (ws.parent / "new.txt").exists()


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_read(ws: Path) -> None:
    checked = ws.resolve() / "inside.txt"
    (ws / "inside.txt").unlink()
    (ws / "inside.txt").symlink_to(ws.parent / "secret.txt")
    with pytest.raises(WorkspaceError, match="changed while in use"):
        read_text(ws.resolve(), checked)


async def test_a_nul_byte_in_a_path_is_refused(ws: Path) -> None:
    with pytest.raises(WorkspaceError, match="NUL"):
        await invoke(read, ws, path="inside.txt\x00.png")


async def test_a_tool_without_a_workspace_says_so(ws: Path) -> None:
    with pytest.raises(ToolError, match="no workspace"):
        await invoke(list_dir, None)
