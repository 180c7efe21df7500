"""The `loopstate` CLI (`cli.main`, in this process) against hostile stored runs, damaged or
locked store files and malformed cassettes: everything shown escaped, every failure one line."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import cli

from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.errors import StoreError
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.stores.sqlite import SQLiteStore

HIDDEN_ID = "c1\x1b[8m\nc2  pay {}"
ARGS = {"path": "docs/\x1b[2Kx\u202eetc", "note": "line\nforged line"}


@tool(needs_approval=True)
def write_file(path: str, note: str) -> str:
    """Write a file."""
    return "wrote"


def loopstate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli.loopstate(*args, cwd=cwd)


def one_line_error(out: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """Exit 2 for what was typed, 1 for a store that failed."""
    assert out.returncode == code, (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr
    return out.stderr


def suspended_run(db: Path) -> str:
    script = [calls(call("write_file", ARGS, id=HIDDEN_ID), content="ok\x1b]0;pwned\x07")]
    agent = Agent(ScriptedModel(script), [write_file], store=SQLiteStore(db), ids=lambda: "run-1")
    result = asyncio.run(agent.run("go"))
    assert result.status == "awaiting_approval"
    return result.run_id


def test_runs_show_prints_a_models_arguments_escaped_under_a_typeable_call_id(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run = suspended_run(db)
    out = loopstate("runs", "show", run, "--db", str(db), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    assert "\u202e" not in out.stdout
    pending = out.stdout.split("waiting for a decision:\n")[1].splitlines()
    # the model's id is not typeable, so the run gives the call its own (the model's is kept
    # for the wire); the arguments are shown escaped
    assert pending[0] == (
        r'  call_1  write_file {"path": "docs/\u001b[2Kx\u202eetc", "note": "line\nforged line"}'
    )


def test_an_error_naming_a_hostile_call_id_is_one_escaped_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = suspended_run(db)
    out = loopstate("approve", run, "x\x1b[8m\nforged", "--db", str(db), cwd=tmp_path)
    assert r"x\x1b[8m\nforged" in one_line_error(out)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": NaN, "note": ""}', "--args holds NaN, which is not JSON"),
        ("[" * 100_000, "--args is nested too deeply"),
        ('{"path": ' + "[" * 70 + "]" * 70 + ', "note": ""}', "nested more than 64 levels"),
    ],
    ids=["nan", "unparsably-deep", "too-deep"],
)
def test_an_edit_from_the_cli_is_parsed_strictly(
    tmp_path: Path, arguments: str, expected: str
) -> None:
    db = tmp_path / "runs.db"
    run = suspended_run(db)
    out = loopstate("edit", run, HIDDEN_ID, "--args", arguments, "--db", str(db), cwd=tmp_path)
    assert expected in one_line_error(out)


def test_a_row_that_is_not_utf8_is_a_store_error_naming_file_and_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = suspended_run(db)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE messages SET body = CAST(X'7B22FF22' AS TEXT) WHERE idx = 0")
    raw.close()
    with pytest.raises(StoreError, match=rf"{db}: run {run}: .*not UTF-8; restore"):
        asyncio.run(SQLiteStore(db).load(run))
    error = one_line_error(loopstate("runs", "show", run, "--db", str(db), cwd=tmp_path), 1)
    assert f"{db}: run {run}:" in error


def test_a_damaged_file_is_a_store_error_and_the_cli_says_so_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    suspended_run(db)
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page into the main file
    raw.close()
    size = db.stat().st_size
    page = 4096
    assert size > 2 * page
    with db.open("r+b") as f:  # keep the header page, scribble over every page after it
        f.seek(page)
        f.write(b"\xa5" * (size - page))
    error = one_line_error(loopstate("runs", "list", "--db", str(db), cwd=tmp_path), 1)
    assert f"{db}:" in error
    assert "restore it from a backup" in error


def test_a_store_path_that_is_a_directory_says_so_and_names_a_file_in_it(tmp_path: Path) -> None:
    folder = tmp_path / ".loopstate"  # the folder the default store lives in, given as --db
    folder.mkdir()
    why = f"{folder} is a directory, not a store file: name a file in it, e.g. {folder}/runs.db"
    for command in (("runs", "list"), ("approve", "run-1", "--all")):
        error = one_line_error(loopstate(*command, "--db", str(folder), cwd=tmp_path), 1)
        assert error == f"loopstate {command[0]}: {why}\n"
    agent = Agent(ScriptedModel(["hi"]), [], store=SQLiteStore(folder))
    with pytest.raises(StoreError) as raised:
        agent.run_sync("go")
    assert str(raised.value) == why
    assert list(folder.iterdir()) == []


LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(30)
"""


def test_a_lock_held_by_another_process_is_a_store_error_after_the_busy_timeout(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run = suspended_run(db)
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db)], stdout=subprocess.PIPE)
    try:
        assert locker.stdout is not None
        assert locker.stdout.readline() == b"locked\n"
        started = time.monotonic()
        out = loopstate(
            "approve", run, HIDDEN_ID, "--db", str(db), "--busy-timeout", "0.2", cwd=tmp_path
        )
        error = one_line_error(out, 1)
        assert f"{db}: run {run}: database is locked" in error
        assert "more than 0.2 s" in error
        assert time.monotonic() - started < 10
        with pytest.raises(StoreError, match=f"run {run}: database is locked"):
            asyncio.run(SQLiteStore(db, busy_timeout=0.1).acquire(run, owner="x", now=0, ttl=1))
    finally:
        locker.kill()
        locker.wait()
        locker.stdout.close()


HEADER = {"kind": "header", "format": "loopstate-cassette", "version": 1}
MODEL = {
    "kind": "model",
    "step": 1,
    "digest": "d",
    "first": 0,
    "messages": [{"role": "user", "content": "go"}],
    "tool_choice": "auto",
    "response": {"message": {"role": "assistant", "content": "ok"}},
}


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([{**HEADER, "version": "1"}], "line 1: malformed header record (version: Input should be"),
        ([HEADER, [1, 2]], "line 2: a record must be a JSON object, not list"),
        ([HEADER, "model"], "line 2: a record must be a JSON object, not str"),
        ([HEADER, {"kind": "model", "step": 1}], "line 2: malformed model record (digest: Field"),
        ([HEADER, {**MODEL, "response": {}}], "line 2: malformed model record (response.message"),
        (
            [HEADER, MODEL, {"kind": "decision", "call_id": "c", "tool": "t", "decision": {}}],
            "line 3: malformed decision record (decision: ",
        ),
        ([HEADER, {"kind": "tool", "call_id": "c"}], "line 2: malformed tool record (tool: Field"),
    ],
    ids=["version-string", "array", "string", "model-fields", "response", "decision", "tool"],
)
def test_a_malformed_cassette_is_one_line_naming_file_and_line_with_exit_2(
    tmp_path: Path, lines: list[object], expected: str
) -> None:
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    error = one_line_error(loopstate("replay", "bad.jsonl", cwd=tmp_path))
    assert f"loopstate replay: bad.jsonl {expected}" in error
