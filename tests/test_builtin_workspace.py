"""Every path is confined to the workspace; each hostile case is refused with a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate.tools.builtin import ToolError, WorkspaceError, list_dir, read, write


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
async def test_paths_that_escape_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(read, ws, path=path)


async def test_an_absolute_path_inside_the_workspace_is_allowed(ws: Path) -> None:
    assert "inside" in await invoke(read, ws, path=str(ws / "inside.txt"))


async def test_a_symlink_leading_outside_is_refused_for_reading_and_writing(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(read, ws, path="link.txt")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(write, ws, path="link.txt", content="pwned")
    assert (ws.parent / "secret.txt").read_text() == "secret\n"


async def test_a_symlinked_directory_leading_outside_is_refused(ws: Path) -> None:
    (ws / "out").symlink_to(ws.parent)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(write, ws, path="out/new.txt", content="x")
    assert not (ws.parent / "new.txt").exists()


async def test_a_symlink_to_a_device_is_refused(ws: Path) -> None:
    (ws / "zero").symlink_to("/dev/zero")
    with pytest.raises(WorkspaceError):
        await invoke(read, ws, path="zero")


async def test_a_fifo_inside_the_workspace_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(WorkspaceError, match="not a regular file or directory"):
        await invoke(read, ws, path="pipe")


async def test_a_symlink_inside_the_workspace_to_a_file_inside_is_followed(ws: Path) -> None:
    (ws / "alias.txt").symlink_to(ws / "inside.txt")
    assert "inside" in await invoke(read, ws, path="alias.txt")


async def test_a_directory_where_a_file_is_expected_is_refused(ws: Path) -> None:
    (ws / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await invoke(read, ws, path="dir")
    with pytest.raises(ToolError, match="is a directory"):
        await invoke(write, ws, path="dir", content="x")


async def test_a_nul_byte_in_a_path_is_refused(ws: Path) -> None:
    with pytest.raises(WorkspaceError, match="NUL"):
        await invoke(read, ws, path="inside.txt\x00.png")


async def test_a_tool_without_a_workspace_says_so(ws: Path) -> None:
    with pytest.raises(ToolError, match="no workspace"):
        await invoke(list_dir, None)
