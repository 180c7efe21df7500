"""The CLI as a newcomer meets it: one store found from any directory of a project, `--db`
before or after the command, `LOOPSTATE_DB`, nothing created by reading, short run ids,
`approve --all`, output that pipes, one-line refusals."""

from __future__ import annotations

import contextlib
import json
import runpy
import subprocess
import sys
from pathlib import Path

from support import cli

SHOP = '''
import sys
from loopstate import Agent, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call, calls

@tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"

def support():
    script = ScriptedModel([calls(call("refund", {"order": "A1"}), call("refund", {"order": "B2"})),
                            "Both refunded."], by_step=True)
    return Agent(script, [refund], instructions="You run the shop.")

if __name__ == "__main__":
    for n in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
        print(support().run_sync("refund my orders").status)
'''


def loopstate(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return cli.loopstate(*args, cwd=cwd, env={"LOOPSTATE_DB": None, **env})


def project(tmp_path: Path, runs: int = 1) -> Path:
    """A project with `shop.py` at its root and `runs` suspended runs in its store."""
    root = tmp_path / "shop"
    (root / "src" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'shop'\n")
    (root / "shop.py").write_text(SHOP)
    with contextlib.chdir(root):  # as `python shop.py` there: the store is the project's
        support = runpy.run_path(str(root / "shop.py"))["support"]
        statuses = [support().run_sync("refund my orders").status for _ in range(runs)]
    assert statuses == ["awaiting_approval"] * runs
    return root


def run_ids(root: Path) -> list[str]:
    return [r["run_id"] for r in json.loads(loopstate("runs", "list", "--json", cwd=root).stdout)]


def test_the_store_is_found_from_any_directory_of_the_project(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert (root / ".loopstate" / "runs.db").exists()
    from_below = loopstate("runs", "list", cwd=root / "src" / "deep")
    assert from_below.returncode == 0, from_below.stderr
    header, row = from_below.stdout.splitlines()
    assert header.split() == ["RUN", "AGE", "STATUS", "PENDING", "STEPS", "PROMPT"]
    assert row.split()[2:] == ["awaiting_approval", "2", "1", "refund", "my", "orders"]
    assert not (root / "src" / "deep" / ".loopstate").exists()


def test_db_before_the_command_and_the_environment_variable_name_the_store(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    db = str(root / ".loopstate" / "runs.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run,) = run_ids(root)
    for args, env in (
        (("--db", db, "runs", "show", run[:6]), {}),
        (("runs", "show", run[:6], "--db", db), {}),
        (("runs", "show", run[:6]), {"LOOPSTATE_DB": db}),
    ):
        out = loopstate(*args, cwd=elsewhere, **env)
        assert out.returncode == 0, (args, out.stderr)
        assert f"run {run} (agent): awaiting_approval" in out.stdout
    assert list(elsewhere.iterdir()) == []


def test_reading_an_empty_directory_creates_no_store_and_says_where_it_looked(
    tmp_path: Path,
) -> None:
    for args in (("runs", "list"), ("runs", "show", "abc"), ("approve", "abc", "call_1")):
        out = loopstate(*args, cwd=tmp_path)
        assert out.returncode == 1, out.stderr
        assert out.stderr.count("\n") == 1
        assert "Traceback" not in out.stderr
        assert f"no store at {tmp_path.resolve()}/.loopstate/runs.db" in out.stderr
        assert "--db PATH or set LOOPSTATE_DB" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_approve_all_and_resume_by_a_short_id_without_pythonpath(tmp_path: Path) -> None:
    root = project(tmp_path)
    (run,) = run_ids(root)
    approved = loopstate("approve", run[:5], "--all", cwd=root)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.count("approve recorded for") == 2
    resumed = loopstate("resume", run[:5], "--agent", "shop:support", cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    assert "status: done" in resumed.stdout
    assert "answer: Both refunded." in resumed.stdout
    listed = loopstate("runs", "list", cwd=root).stdout.splitlines()[1].split()
    assert listed[2:4] == ["done", "-"]
    neither = loopstate("approve", run[:5], cwd=root)
    assert (neither.returncode, "takes a CALL or --all" in neither.stderr) == (2, True)


def test_an_ambiguous_or_unknown_prefix_is_one_line(tmp_path: Path) -> None:
    root = project(tmp_path, runs=20)
    ids = run_ids(root)
    first = {i[0] for i in ids}
    shared = next(c for c in first if sum(i.startswith(c) for i in ids) > 1)
    out = loopstate("runs", "show", shared, cwd=root)
    assert (out.returncode, out.stderr.count("\n")) == (2, 1)
    assert f"{shared!r} is the start of" in out.stderr
    assert "give more of it" in out.stderr
    unknown = loopstate("runs", "show", "zz", cwd=root)
    assert (unknown.returncode, "no run 'zz'" in unknown.stderr) == (2, True)


def test_runs_list_pipes_into_head_without_a_broken_pipe(tmp_path: Path) -> None:
    root = project(tmp_path, runs=40)
    out = subprocess.run(
        f"{sys.executable} -m loopstate runs list --limit 40 | head -1",
        shell=True, cwd=root, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.split() == ["RUN", "AGE", "STATUS", "PENDING", "STEPS", "PROMPT"]
    assert out.stderr == ""


def test_an_agent_run_drawn_on_another_machine_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    (run,) = run_ids(root)
    out = loopstate("diagram", "coaching", "--run", run[:8], cwd=root)
    assert (out.returncode, out.stdout, out.stderr.count("\n")) == (2, "", 1)
    assert "ran on the agent machine, not coaching: draw it with `loopstate diagram agent" in (
        out.stderr
    )
    drawn = loopstate("diagram", "--run", run[:8], cwd=root)
    assert drawn.returncode == 0
    assert "stateDiagram-v2" in drawn.stdout


def test_resume_with_an_agent_lacking_the_pending_tool_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    (root / "other.py").write_text(
        "from loopstate import Agent, ScriptedModel\n"
        "agent = Agent(ScriptedModel(['hi']), [], instructions='You run the shop.')\n"
    )
    (run,) = run_ids(root)
    loopstate("approve", run, "--all", cwd=root)
    out = loopstate("resume", run, "--agent", "other:agent", cwd=root)
    assert (out.returncode, out.stderr.count("\n")) == (2, 1), out.stderr
    assert "needs the tools refund for its pending calls and this agent lacks refund" in (
        out.stderr
    )
    assert loopstate("resume", run, "--agent", "shop:support", cwd=root).returncode == 0


def test_the_suspend_hint_works_typed_as_shown_from_a_subdirectory(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (tmp_path / "src").mkdir()
    out = loopstate("demo", "--suspend", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "stop reason: None" not in out.stdout
    commands = [line.split("#")[0].strip() for line in out.stdout.splitlines()
                if line.startswith(f"  {sys.executable} -m loopstate ")]  # fmt: skip
    assert [c.split()[3] for c in commands] == ["approve", "resume"], out.stdout
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=tmp_path / "src", capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
    assert "status: done" in done.stdout
    assert (
        (tmp_path / ".loopstate/demo-workspace/notes.md")
        .read_text()
        .endswith("driven by a state machine.\n")
    )


def test_an_aborted_run_shows_nothing_pending(tmp_path: Path) -> None:
    root = project(tmp_path)
    (run,) = run_ids(root)
    assert loopstate("abort", run[:6], "--reason", "changed my mind", cwd=root).returncode == 0
    row = loopstate("runs", "list", cwd=root).stdout.splitlines()[1].split()
    assert row[2:4] == ["aborted", "-"]
    shown = loopstate("runs", "show", run[:6], cwd=root).stdout
    assert "stop reason: aborted: changed my mind" in shown
    assert "waiting for a decision" not in shown
    assert json.loads(loopstate("runs", "show", run, "--json", cwd=root).stdout)["pending"] == []


def test_a_diagram_written_where_it_cannot_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file")
    cases = {
        ("-o", str(tmp_path / "missing" / "run.svg")): "No such file or directory",
        ("-o", str(tmp_path)): "Is a directory",
        ("--all", str(tmp_path / "taken")): "File exists",
    }
    for args, why in cases.items():
        out = loopstate("diagram", "agent", *args, cwd=tmp_path)
        assert (out.returncode, out.stdout) == (1, ""), out.stderr
        assert out.stderr.splitlines() == [
            f"loopstate diagram: cannot write {args[1]}: {why}; give a writable file (-o) "
            "or directory"
        ]
    drawn = loopstate("diagram", "agent", "-o", str(tmp_path / "run.mmd"), cwd=tmp_path)
    assert drawn.returncode == 0
    assert (tmp_path / "run.mmd").read_text().startswith("stateDiagram-v2")


def test_the_demo_on_a_store_it_cannot_use_says_so_in_one_line(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"  # LOOPSTATE_DB set to the wrong file
    notes.write_text("not a database\n")
    for mode in ("--suspend", "--yes"):
        out = loopstate("demo", mode, cwd=tmp_path, LOOPSTATE_DB=str(notes))
        assert out.returncode == 1, out.stderr
        assert out.stderr.splitlines() == [
            f"loopstate demo: {notes} is not a usable loopstate store: file is not a database"
        ]
    assert notes.read_text() == "not a database\n"
