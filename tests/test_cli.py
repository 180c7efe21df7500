"""The `loopstate` command: in this process (`cli.main`), and from other processes for real."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.cli import loopstate, loopstate_process


def test_demo_yes_runs_offline_to_a_final_answer(tmp_path: Path) -> None:
    out = loopstate("demo", "--yes", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "[ 1] idle → thinking" in out.stdout
    assert "thinking → awaiting_approval" in out.stdout
    assert "notes.md now reads: '# Notes\\n\\nThe agent loop is driven by" in out.stdout
    assert "answer: Fixed the typo in notes.md" in out.stdout
    assert "status: done" in out.stdout


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ("d\nkeep it\n", "the reviewer said 'keep it'"),
        ('e\nnot json\ne\n{"path": "notes.md", "content": "edited"}\n', "reviewer's edited"),
        ("b\nstop now\n", "status: aborted   run: "),
        ("", "aborted: no answer: the terminal closed"),
    ],
    ids=["deny", "edit", "abort", "eof"],
)
def test_demo_asks_in_the_terminal(tmp_path: Path, answers: str, expected: str) -> None:
    out = loopstate("demo", stdin=answers, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout


def run_id_of(cwd: Path) -> str:
    listing = loopstate("runs", "list", "--json", cwd=cwd)
    assert listing.returncode == 0, listing.stderr
    runs = json.loads(listing.stdout)
    assert len(runs) == 1
    run_id: str = runs[0]["run_id"]
    return run_id


def test_a_suspended_demo_is_decided_and_resumed_from_other_processes(tmp_path: Path) -> None:
    suspended = loopstate_process("demo", "--suspend", cwd=tmp_path)
    assert "status: awaiting_approval" in suspended.stdout
    run = run_id_of(tmp_path)
    shown = json.loads(loopstate("runs", "show", run, "--json", cwd=tmp_path).stdout)
    assert [p["tool"] for p in shown["pending"]] == ["write"]
    call = shown["pending"][0]["call_id"]
    edit = loopstate_process("edit", run, call, "--args",
                             '{"path": "notes.md", "content": "hi\\n"}', cwd=tmp_path)  # fmt: skip
    assert edit.returncode == 0, edit.stderr
    resumed = loopstate_process("resume", run, "--agent", "loopstate.demo:suspended_agent",
                                cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "status: done" in resumed.stdout
    assert (tmp_path / ".loopstate/demo-workspace/notes.md").read_text() == "hi\n"
    shown = json.loads(loopstate("runs", "show", run, "--json", cwd=tmp_path).stdout)
    decided = next(t for t in shown["transitions"] if t["event"] == "decided")
    assert decided["actor"].startswith("cli:")


def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    loopstate("demo", "--suspend", cwd=tmp_path)
    run = run_id_of(tmp_path)
    cases = [
        (("runs", "show", "ghost"), "no run 'ghost'"),
        (("approve", run, "nope"), "has no call nope"),
        (("edit", run, "call_3_1", "--args", "{oops"), "--args is not valid JSON"),
        (("edit", run, "call_3_1", "--args", "[1]"), "--args must be a JSON object"),
        (("resume", run, "--agent", "nowhere:agent"), "cannot load the agent"),
    ]
    for args, message in cases:
        out = loopstate(*args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert loopstate("approve", run, "call_3_1", cwd=tmp_path).returncode == 0
    again = loopstate("deny", run, "call_3_1", "--reason", "x", cwd=tmp_path)
    assert (again.returncode, "already decided" in again.stderr) == (2, True)


def test_abort_ends_a_suspended_run_and_it_cannot_be_resumed(tmp_path: Path) -> None:
    loopstate("demo", "--suspend", cwd=tmp_path)
    run = run_id_of(tmp_path)
    aborted = loopstate("abort", run, "--reason", "not needed", cwd=tmp_path)
    assert aborted.returncode == 0, aborted.stderr
    assert "aborted (aborted: not needed)" in aborted.stdout
    listing = json.loads(
        loopstate("runs", "list", "--status", "aborted", "--json", cwd=tmp_path).stdout
    )
    assert [r["run_id"] for r in listing] == [run]
    resumed = loopstate("resume", run, "--agent", "loopstate.demo:suspended_agent", cwd=tmp_path)
    assert (resumed.returncode, "has ended" in resumed.stderr) == (2, True)


FLOW_MODULE = """
import sys
sys.path.insert(0, {tests!r})
from flow_child import happy_script
from loopstate import ScriptedModel
from loopstate.machines.coaching import coaching_flow

def flow():
    model = ScriptedModel(happy_script(), by_step=True)
    return coaching_flow(models={{p: model for p in ("default", "analyst", "plan")}})
"""


def test_a_flow_is_answered_approved_and_aborted_from_the_shell(tmp_path: Path) -> None:
    import asyncio

    (tmp_path / "coachflows.py").write_text(FLOW_MODULE.format(tests=str(Path(__file__).parent)))
    sys.path.insert(0, str(tmp_path))
    try:
        import coachflows

        first = asyncio.run(coachflows.flow().run("I want to run a 4:25 1500m"))
    finally:
        sys.path.remove(str(tmp_path))
    assert first.status == "awaiting_input"
    resumed = loopstate("resume", first.run_id, "--agent", "coachflows:flow", "--message",
                        "43, 70 km a week, 5 days, a stress fracture", cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "status: awaiting_approval" in resumed.stdout
    shown = json.loads(loopstate("runs", "show", first.run_id, "--json", cwd=tmp_path).stdout)
    call = shown["pending"][0]["call_id"]
    assert loopstate("approve", first.run_id, call, cwd=tmp_path).returncode == 0
    planned = loopstate("resume", first.run_id, "--agent", "coachflows:flow", cwd=tmp_path)
    assert "status: awaiting_input" in planned.stdout, planned.stderr
    aborted = loopstate("abort", first.run_id, "--reason", "moved away", cwd=tmp_path)
    assert aborted.returncode == 0, aborted.stderr
    shown = json.loads(loopstate("runs", "show", first.run_id, "--json", cwd=tmp_path).stdout)
    assert (shown["status"], shown["transitions"][-1]["source"]) == ("aborted", "present")
