"""`apply_patch` on real files: strict hunks, every file or none, creation, deletion, renames."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate.tools.builtin import ToolError, WorkspaceError, apply_patch


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    print('hi')\n")
    (tmp_path / "notes.md").write_text("one\ntwo\nthree\n")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


MODIFY_AND_CREATE = """\
diff --git a/notes.md b/notes.md
index 5626abf..f719efd 100644
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


async def test_a_patch_modifies_and_creates_files(ws: Path) -> None:
    assert await invoke(apply_patch, ws, patch=MODIFY_AND_CREATE) == (
        "patched: modified notes.md, created added.txt"
    )
    assert (ws / "notes.md").read_text() == "one\nTWO\nthree\n"
    assert (ws / "added.txt").read_text() == "hello\nworld\n"
    assert not list(ws.rglob("*.tmp"))


async def test_a_patch_with_one_bad_hunk_changes_nothing(ws: Path) -> None:
    before = snapshot(ws)
    bad = MODIFY_AND_CREATE + "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-def nope():\n+x\n"
    with pytest.raises(ToolError, match=r"src/app.py: hunk 1 \(@@ -1 \+1 @@\) does not match"):
        await invoke(apply_patch, ws, patch=bad)
    assert snapshot(ws) == before


async def test_a_hunk_applies_where_its_context_is_even_if_the_line_numbers_are_off(
    ws: Path,
) -> None:
    patch = "--- a/notes.md\n+++ b/notes.md\n@@ -7,2 +7,2 @@\n two\n-three\n+3\n"
    await invoke(apply_patch, ws, patch=patch)
    assert (ws / "notes.md").read_text() == "one\ntwo\n3\n"


async def test_a_removed_line_starting_with_dashes_is_not_taken_for_a_file_header(
    ws: Path,
) -> None:
    (ws / "q.sql").write_text("-- old comment\nselect 1;\n")
    patch = (
        "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- old comment\n+-- new comment\n select 1;\n"
    )
    await invoke(apply_patch, ws, patch=patch)
    assert (ws / "q.sql").read_text() == "-- new comment\nselect 1;\n"


async def test_no_newline_at_end_of_file_markers_are_honoured(ws: Path) -> None:
    patch = (
        "--- a/notes.md\n+++ b/notes.md\n@@ -3 +3 @@\n-three\n+THREE\n"
        "\\ No newline at end of file\n"
    )
    await invoke(apply_patch, ws, patch=patch)
    assert (ws / "notes.md").read_text() == "one\ntwo\nTHREE"


async def test_hunk_line_counts_that_do_not_fit_are_refused(ws: Path) -> None:
    short = "--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n three\n"
    with pytest.raises(ToolError, match="header does not count it"):
        await invoke(apply_patch, ws, patch=short)
    long = "--- a/notes.md\n+++ b/notes.md\n@@ -1,5 +1,5 @@\n one\n-two\n+TWO\n"
    with pytest.raises(ToolError, match="counts 2 more old and 2 more new lines"):
        await invoke(apply_patch, ws, patch=long)


async def test_a_patch_deletes_a_file_only_when_it_removes_all_its_lines(ws: Path) -> None:
    partial = "--- a/notes.md\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    with pytest.raises(ToolError, match="does not remove all of its lines"):
        await invoke(apply_patch, ws, patch=partial)
    assert (ws / "notes.md").exists()
    whole = "--- a/notes.md\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n"
    assert await invoke(apply_patch, ws, patch=whole) == "patched: deleted notes.md"
    assert not (ws / "notes.md").exists()


async def test_a_patch_renames_a_file(ws: Path) -> None:
    patch = "--- a/notes.md\n+++ b/docs/notes.txt\n@@ -1 +1 @@\n-one\n+ONE\n"
    assert await invoke(apply_patch, ws, patch=patch) == (
        "patched: notes.md renamed to docs/notes.txt, removed notes.md"
    )
    assert (ws / "docs/notes.txt").read_text() == "ONE\ntwo\nthree\n"
    assert not (ws / "notes.md").exists()


async def test_a_patch_keeps_crlf_line_endings(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"a\r\nb\r\n")
    await invoke(
        apply_patch, ws, patch="--- a/win.txt\n+++ b/win.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    )
    assert (ws / "win.txt").read_bytes() == b"a\r\nB\r\n"


async def test_a_patch_refuses_to_create_an_existing_file_or_name_a_file_twice(ws: Path) -> None:
    create = "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(ToolError, match="already exists"):
        await invoke(apply_patch, ws, patch=create)
    hunk = "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-one\n+1\n"
    with pytest.raises(ToolError, match="appears twice"):
        await invoke(apply_patch, ws, patch=hunk + hunk)
    assert (ws / "notes.md").read_text() == "one\ntwo\nthree\n"


async def test_a_patch_cannot_reach_outside_the_workspace(ws: Path) -> None:
    escape = "--- /dev/null\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(apply_patch, ws, patch=escape)
    assert not (ws.parent / "evil.txt").exists()


async def test_text_without_a_diff_is_refused(ws: Path) -> None:
    with pytest.raises(ToolError, match="no file changes"):
        await invoke(apply_patch, ws, patch="just words")
