"""`loopstate runs fork` for real in subprocesses: the new id, `runs show`, refusals."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from test_cli_runs import Shell


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    shell = Shell(tmp_path)
    shell.suspend()
    shell.ok("approve", "run-1", "--all")
    shell.ok("resume", "run-1", "--agent", "shop:agent")
    return shell


def test_a_fork_from_the_shell_prints_its_id_shows_its_origin_and_resumes(sh: Shell) -> None:
    fork = sh.ok("runs", "fork", "run-1", "--at", "4", "--result", "call_1_1=refunded").strip()
    assert len(fork) == 32
    assert sorted(sh.charges()) == ["charge 5", "charge 7"]

    shown = sh.ok("runs", "show", fork)
    assert (
        "forked from run run-1 at transition 4 by cli:ada: result of call call_1_1 replaced"
        in shown
    )
    assert "(above: copied from run run-1)" in shown
    resumed = sh.ok("resume", fork[:12], "--agent", "shop:agent")
    assert "final: refunded | charged 7" in resumed
    assert sorted(sh.charges()) == ["charge 5", "charge 7"]  # nothing ran again


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--at", "99"), "run run-1 has no transition 99 (it has 1–5)"),
        (("--at", "4", "--result", "nope"), "--result CALL=TEXT expected, got 'nope'"),
        (("--at", "4", "--result", "x=y"), "no result of call 'x' at the fork point"),
        (("--at", "4", "--replace-message", "x=y"), "needs INDEX=TEXT with a number, not 'x'"),
    ],
)
def test_a_fork_the_run_cannot_take_is_one_line_and_exit_2(
    sh: Shell, args: tuple[str, ...], expected: str
) -> None:
    assert expected in sh.fails("runs", "fork", "run-1", *args)
    assert sh.ok("runs", "list").count("\n") == 2  # the header and run-1


def test_a_fork_of_a_run_another_process_holds_is_busy(sh: Shell) -> None:
    with sqlite3.connect(sh.db) as db:
        db.execute("UPDATE runs SET lease_owner = 'other-host:1:x', lease_until = ?",
                   (time.time() + 60,))  # fmt: skip
    assert "is busy: other-host:1:x holds it" in sh.fails(
        "runs", "fork", "run-1", "--at", "2", code=1
    )
