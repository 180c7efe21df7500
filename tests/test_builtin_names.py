"""File names that are not UTF-8 reach the model as valid text, and can still be used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate import Agent, ScriptedModel, SQLiteStore
from loopstate.engine.models.scripted import call
from loopstate.tools.builtin import edit, glob, grep, list_dir, read

RAW = b"caf\xff.txt"  # \xff is never UTF-8: Python holds the name as 'caf\udcff.txt'
SHOWN = "caf\\xff.txt"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / os.fsdecode(RAW)).write_bytes(b"needle \xfe here\n")
    return tmp_path


def valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def test_listing_tools_show_an_undecodable_byte_as_an_escape(ws: Path) -> None:
    outputs = [
        await invoke(list_dir, ws),
        await invoke(glob, ws, pattern="*.txt"),
        await invoke(grep, ws, pattern="needle"),
    ]
    assert outputs == [SHOWN, SHOWN, f"{SHOWN}:1: needle \ufffd here"]
    assert all(valid_utf8(out) for out in outputs)


async def test_a_file_is_found_by_the_name_it_is_shown_with(ws: Path) -> None:
    assert await invoke(read, ws, path=SHOWN) == "     1\tneedle \ufffd here"
    (ws / os.fsdecode(RAW)).write_text("old\n")
    assert await invoke(edit, ws, path=SHOWN, old_string="old", new_string="new") == (
        f"edited {SHOWN}"
    )
    assert (ws / os.fsdecode(RAW)).read_bytes() == b"new\n"


async def test_a_file_named_with_the_escape_itself_comes_first(ws: Path) -> None:
    (ws / SHOWN).write_text("the literal name\n")
    assert await invoke(read, ws, path=SHOWN) == "     1\tthe literal name"


async def test_a_run_that_lists_such_a_name_is_stored_and_finishes(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = tmp_path_factory.mktemp("db") / "runs.db"
    model = ScriptedModel([call("list_dir", {}), call("read", {"path": SHOWN}), "done"])
    result = await Agent(model, [list_dir, read], workspace=ws, store=SQLiteStore(db)).run("go")
    assert (result.status, result.output) == ("done", "done")
    assert [m.content for m in model.requests[2].messages if m.role == "tool"] == [
        SHOWN,
        "     1\tneedle \ufffd here",
    ]
