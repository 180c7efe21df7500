"""Reading, listing, searching and editing tools on real files."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate.tools.builtin import (
    ToolError,
    all_tools,
    apply_patch,
    edit,
    glob,
    grep,
    list_dir,
    multi_edit,
    read,
    registry,
    todo_read,
    todo_write,
    write,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    print('hi')\n    print('hi')\n")
    (tmp_path / "notes.md").write_text("one\ntwo\nthree\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    return tmp_path


def test_changing_tools_need_approval_and_reading_tools_never_ask() -> None:
    asks = {t.name for t in all_tools if t.needs_approval is True}
    assert asks == {"write", "edit", "multi_edit", "apply_patch", "bash"}
    assert {t.name for t in registry().category("read_only")} == {
        "read", "list_dir", "glob", "grep", "todo_read"
    }  # fmt: skip


async def test_read_numbers_lines_and_pages(ws: Path) -> None:
    assert await invoke(read, ws, path="notes.md", offset=2, limit=1) == (
        "     2\ttwo\n[1 more lines; read on with offset=3]"
    )
    with pytest.raises(ToolError, match="binary"):
        await invoke(read, ws, path="blob.bin")
    with pytest.raises(ToolError, match="does not exist"):
        await invoke(read, ws, path="missing.md")


async def test_list_dir_glob_and_grep_stay_relative_and_sorted(ws: Path) -> None:
    assert await invoke(list_dir, ws) == "blob.bin\nnotes.md\nsrc/"
    assert await invoke(glob, ws, pattern="**/*.py") == "src/app.py"
    assert await invoke(grep, ws, pattern=r"print\('hi'\)") == (
        "src/app.py:2:     print('hi')\nsrc/app.py:3:     print('hi')"
    )
    with pytest.raises(ToolError, match="outside"):
        await invoke(glob, ws, pattern="../*")


async def test_write_creates_directories_and_overwrites_atomically(ws: Path) -> None:
    assert await invoke(write, ws, path="new/dir/f.txt", content="x") == (
        "created new/dir/f.txt (1 characters)"
    )
    assert await invoke(write, ws, path="notes.md", content="new") == (
        "overwrote notes.md (3 characters)"
    )
    assert (ws / "notes.md").read_text() == "new"
    assert not [p for p in ws.rglob("*.tmp")]


async def test_edit_needs_a_unique_match_or_an_explicit_count(ws: Path) -> None:
    with pytest.raises(ToolError, match="matches 2 times"):
        await invoke(edit, ws, path="src/app.py", old_string="print('hi')", new_string="x")
    await invoke(edit, ws, path="src/app.py", old_string="print('hi')", new_string="go()", count=2)
    assert (ws / "src/app.py").read_text() == "def main():\n    go()\n    go()\n"
    with pytest.raises(ToolError, match="not found"):
        await invoke(edit, ws, path="src/app.py", old_string="nope", new_string="x")


async def test_multi_edit_applies_all_or_none(ws: Path) -> None:
    edits = [{"old_string": "one", "new_string": "1"}, {"old_string": "missing", "new_string": "x"}]
    with pytest.raises(ToolError, match="edit 2 of 2: old_string was not found; nothing"):
        await invoke(multi_edit, ws, path="notes.md", edits=edits)
    assert (ws / "notes.md").read_text() == "one\ntwo\nthree\n"
    edits[1] = {"old_string": "two", "new_string": "2"}
    await invoke(multi_edit, ws, path="notes.md", edits=edits)
    assert (ws / "notes.md").read_text() == "1\n2\nthree\n"


PATCH = """\
--- a/notes.md
+++ b/notes.md
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
--- /dev/null
+++ b/added.txt
@@ -0,0 +1,2 @@
+hello
+world
"""


async def test_apply_patch_changes_creates_and_is_atomic(ws: Path) -> None:
    assert await invoke(apply_patch, ws, patch=PATCH) == "patched notes.md, added.txt"
    assert (ws / "notes.md").read_text() == "one\nTWO\nthree\n"
    assert (ws / "added.txt").read_text() == "hello\nworld\n"


async def test_a_patch_with_one_bad_hunk_changes_nothing(ws: Path) -> None:
    bad = PATCH + "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-def nope():\n+x\n"
    with pytest.raises(ToolError, match="does not match line 1; nothing was changed"):
        await invoke(apply_patch, ws, patch=bad)
    assert (ws / "notes.md").read_text() == "one\ntwo\nthree\n"


async def test_apply_patch_deletes_files_and_refuses_paths_outside(ws: Path) -> None:
    delete = "--- a/notes.md\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n"
    await invoke(apply_patch, ws, patch=delete)
    assert not (ws / "notes.md").exists()
    escape = "--- /dev/null\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(ToolError, match="outside the workspace"):
        await invoke(apply_patch, ws, patch=escape)
    with pytest.raises(ToolError, match="no file changes"):
        await invoke(apply_patch, ws, patch="just words")


async def test_the_todo_list_is_kept_per_run(ws: Path) -> None:
    assert await invoke(todo_read, ws) == "no tasks yet"
    todos = [{"content": "read", "status": "completed"}, {"content": "fix"}]
    assert await invoke(todo_write, ws, todos=todos) == "2 tasks, 1 completed"
    assert await invoke(todo_read, ws) == "1. [completed] read\n2. [pending] fix"
