"""Reading, listing, searching, editing and todo tools on real files."""

from __future__ import annotations

import importlib
import os
import stat
from pathlib import Path

import pytest
from builtin_support import invoke
from pydantic import ValidationError

from loopstate import ToolContext
from loopstate.tools import builtin
from loopstate.tools.builtin import (
    ToolError,
    WorkspaceError,
    all_tools,
    edit,
    editing_tools,
    glob,
    grep,
    list_dir,
    multi_edit,
    read,
    read_only_tools,
    registry,
    shell_tools,
    todo_read,
    todo_write,
    web_tools,
    write,
)
from loopstate.tools.builtin.reading import MAX_READ_CHARS


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    print('hi')\n    print('hi')\n")
    (tmp_path / "notes.md").write_text("one\ntwo\nthree\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    return tmp_path


def test_changing_tools_need_approval_and_reading_tools_never_ask() -> None:
    asks = {t.name for t in all_tools if t.needs_approval is not False}
    assert asks == {"write", "edit", "multi_edit", "apply_patch", "bash"}
    assert all(t.needs_approval is False for t in read_only_tools + web_tools)


def test_toolsets_are_offered_by_category() -> None:
    tools = registry()
    assert tools.categories == {"read_only", "editing", "shell", "web"}
    for name, toolset in [
        ("read_only", read_only_tools),
        ("editing", editing_tools),
        ("shell", shell_tools),
        ("web", web_tools),
    ]:
        assert tools.category(name) == toolset
    assert [t.name for t in read_only_tools] == ["read", "list_dir", "glob", "grep", "todo_read"]


def test_every_builtin_module_is_importable_under_its_own_name() -> None:
    # An attribute of the package named like a module (the `shell` toolset once was) makes
    # `loopstate.tools.builtin.shell` the list and leaves the module reachable only by import.
    package = Path(builtin.__file__).parent
    for source in sorted(package.glob("[!_]*.py")):
        module = importlib.import_module(f"loopstate.tools.builtin.{source.stem}")
        assert getattr(builtin, source.stem) is module, source.stem


def test_the_toolsets_first_names_still_import() -> None:
    from loopstate.tools.builtin import editing, read_only, shell, web

    assert (read_only, editing, shell, web) == (
        read_only_tools,
        editing_tools,
        shell_tools,
        web_tools,
    )


async def test_read_numbers_lines_and_pages(ws: Path) -> None:
    assert await invoke(read, ws, path="notes.md", offset=2, limit=1) == (
        "     2\ttwo\n[1 more lines; read on with offset=3]"
    )
    with pytest.raises(ToolError, match=r"offset 9 is past the end: notes\.md has 3 lines"):
        await invoke(read, ws, path="notes.md", offset=9)
    (ws / "empty.txt").write_text("")
    assert await invoke(read, ws, path="empty.txt") == "(empty file)"


async def test_read_refuses_binary_and_missing_files(ws: Path) -> None:
    with pytest.raises(ToolError, match="binary"):
        await invoke(read, ws, path="blob.bin")
    with pytest.raises(ToolError, match="does not exist"):
        await invoke(read, ws, path="missing.md")


async def test_read_counts_lines_at_newlines_only(ws: Path) -> None:
    (ws / "ff.c").write_text("a\fb\u2028c\nd\n")
    assert await invoke(read, ws, path="ff.c") == "     1\ta\fb\u2028c\n     2\td"


async def test_read_cuts_long_lines_and_stops_before_the_output_cap(ws: Path) -> None:
    (ws / "min.js").write_text("x" * 5000 + "\n" + ("y" * 1000 + "\n") * 100)
    out = await invoke(read, ws, path="min.js")
    assert out.startswith("     1\t" + "x" * 2000 + " [line cut: 3000 more chars]\n")
    assert len(out) <= MAX_READ_CHARS + 200
    assert out.endswith("more lines; read on with offset=17]")


async def test_list_dir_glob_and_grep_stay_relative_and_sorted(ws: Path) -> None:
    assert await invoke(list_dir, ws) == "blob.bin\nnotes.md\nsrc/"
    assert await invoke(glob, ws, pattern="**/*.py") == "src/app.py"
    assert await invoke(grep, ws, pattern=r"print\('hi'\)") == (
        "src/app.py:2:     print('hi')\nsrc/app.py:3:     print('hi')"
    )


async def test_glob_and_grep_refuse_patterns_leaving_the_workspace(ws: Path) -> None:
    with pytest.raises(WorkspaceError, match="outside"):
        await invoke(glob, ws, pattern="../*")
    with pytest.raises(WorkspaceError, match="outside"):
        await invoke(grep, ws, pattern="x", include="/etc/*")


async def test_glob_does_not_list_files_behind_a_symlink_leading_outside(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.py").write_text("x")
    (ws / "out").symlink_to(outside)
    assert await invoke(glob, ws, pattern="out/*") == "no files match"
    assert await invoke(grep, ws, pattern="x", include="out/*") == "no matches"


async def test_grep_skips_version_control_unless_asked_and_can_ignore_case(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("MAIN branch\n")
    assert await invoke(grep, ws, pattern="main") == "src/app.py:1: def main():"
    assert await invoke(grep, ws, pattern="main", ignore_case=True) == "src/app.py:1: def main():"
    assert await invoke(grep, ws, pattern="main", include=".git/*", ignore_case=True) == (
        ".git/config:1: MAIN branch"
    )


async def test_grep_stops_at_max_results_and_reports_a_bad_regex(ws: Path) -> None:
    assert await invoke(grep, ws, pattern="hi", max_results=1) == (
        "src/app.py:2:     print('hi')\n[stopped at 1 matches]"
    )
    with pytest.raises(ToolError, match="invalid regular expression"):
        await invoke(grep, ws, pattern="(")


async def test_write_creates_directories_and_overwrites_atomically(ws: Path) -> None:
    assert await invoke(write, ws, path="new/dir/f.txt", content="x") == (
        "created new/dir/f.txt (1 characters)"
    )
    assert await invoke(write, ws, path="notes.md", content="new") == (
        "overwrote notes.md (3 characters)"
    )
    assert (ws / "notes.md").read_text() == "new"
    assert not [p for p in ws.rglob("*.tmp")]


async def test_rewriting_a_file_keeps_its_permissions(ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o750)
    await invoke(write, ws, path="run.sh", content="echo bye\n")
    await invoke(edit, ws, path="run.sh", old_string="bye", new_string="ciao")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    umask = os.umask(0)
    os.umask(umask)
    await invoke(write, ws, path="fresh.txt", content="x")
    assert stat.S_IMODE((ws / "fresh.txt").stat().st_mode) == 0o666 & ~umask


async def test_edit_needs_a_unique_match_or_an_explicit_count(ws: Path) -> None:
    with pytest.raises(ToolError, match="matches 2 times"):
        await invoke(edit, ws, path="src/app.py", old_string="print('hi')", new_string="x")
    await invoke(edit, ws, path="src/app.py", old_string="print('hi')", new_string="go()", count=2)
    assert (ws / "src/app.py").read_text() == "def main():\n    go()\n    go()\n"
    with pytest.raises(ToolError, match="not found"):
        await invoke(edit, ws, path="src/app.py", old_string="nope", new_string="x")
    with pytest.raises(ToolError, match="matches 2 times, not 3"):
        await invoke(edit, ws, path="src/app.py", old_string="go()", new_string="x", count=3)


async def test_edit_refuses_a_no_op_and_a_count_below_one(ws: Path) -> None:
    with pytest.raises(ToolError, match="the same"):
        await invoke(edit, ws, path="notes.md", old_string="one", new_string="one")
    with pytest.raises(ValidationError):
        await invoke(edit, ws, path="notes.md", old_string="one", new_string="1", count=0)


async def test_edit_leaves_a_file_that_is_not_utf8_untouched(ws: Path) -> None:
    (ws / "latin.txt").write_bytes("café one\n".encode("latin-1"))
    with pytest.raises(ToolError, match="not UTF-8"):
        await invoke(edit, ws, path="latin.txt", old_string="one", new_string="two")
    assert (ws / "latin.txt").read_bytes() == "café one\n".encode("latin-1")


async def test_edit_keeps_crlf_line_endings(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    await invoke(edit, ws, path="win.txt", old_string="two", new_string="2")
    assert (ws / "win.txt").read_bytes() == b"one\r\n2\r\n"


async def test_multi_edit_applies_all_or_none(ws: Path) -> None:
    edits = [{"old_string": "one", "new_string": "1"}, {"old_string": "missing", "new_string": "x"}]
    with pytest.raises(ToolError, match=r"edit 2 of 2: old_string was not found.*nothing"):
        await invoke(multi_edit, ws, path="notes.md", edits=edits)
    assert (ws / "notes.md").read_text() == "one\ntwo\nthree\n"
    edits[1] = {"old_string": "1\ntwo", "new_string": "1\n2"}  # sees the first edit's result
    assert await invoke(multi_edit, ws, path="notes.md", edits=edits) == (
        "applied 2 edits to notes.md"
    )
    assert (ws / "notes.md").read_text() == "1\n2\nthree\n"
    with pytest.raises(ValidationError):
        await invoke(multi_edit, ws, path="notes.md", edits=[])


def _ctx(tool_name: str, workspace: Path, run_id: str) -> ToolContext[None]:
    return ToolContext(run_id=run_id, call_id="c", tool=tool_name, deps=None, workspace=workspace)


async def test_the_todo_list_is_kept_per_run_in_the_workspace(ws: Path) -> None:
    assert await invoke(todo_read, ws) == "no tasks yet"
    todos = [{"content": "read", "status": "completed"}, {"content": "fix"}]
    assert await invoke(todo_write, ws, todos=todos) == "2 tasks, 1 completed"
    assert await invoke(todo_read, ws) == "1. [completed] read\n2. [pending] fix"
    assert (ws / ".loopstate/todos/run-1.json").is_file()
    other = await todo_read.invoke(todo_read.validate({}), _ctx("todo_read", ws, "run/2"))
    assert other == "no tasks yet"


async def test_a_corrupt_todo_list_is_reported_and_can_be_rewritten(ws: Path) -> None:
    (ws / ".loopstate/todos").mkdir(parents=True)
    (ws / ".loopstate/todos/run-1.json").write_text("{not json")
    with pytest.raises(ToolError, match="unreadable"):
        await invoke(todo_read, ws)
    await invoke(todo_write, ws, todos=[{"content": "again"}])
    assert await invoke(todo_read, ws) == "1. [pending] again"


async def test_the_todo_list_cannot_be_redirected_outside(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (ws / ".loopstate").symlink_to(outside)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await invoke(todo_write, ws, todos=[{"content": "x"}])
    assert not list(outside.iterdir())
