"""`loopstate runs|approve|deny|edit|abort|resume` against a store file given with --db, run
in this process (`cli.main`); the agent resumed by the CLI has its store replaced by --db."""

from __future__ import annotations

import json
import runpy
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import loopstate

from loopstate.engine.stores.sqlite import SQLiteStore

AGENT_MODULE = '''
from pathlib import Path
from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.models.scripted import call, calls

LOG = Path(__file__).with_name("log.txt")

@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge a card."""
    with LOG.open("a") as f:
        f.write(f"charge {amount}\\n")
    return f"charged {amount}"

def results(request):
    return "final: " + " | ".join(m.content for m in request.messages if m.role == "tool")

def echo(request):
    return "you said: " + request.messages[-1].content

SCRIPT = [calls(call("charge", {"amount": 5}), call("charge", {"amount": 7})), results, echo]
# Its own store is elsewhere: `loopstate resume --db` must replace it.
agent = Agent(ScriptedModel(SCRIPT, by_step=True), [charge], ids=lambda: "run-1")

if __name__ == "__main__":
    import sys
    from loopstate.engine.stores.sqlite import SQLiteStore
    suspended = agent.clone(store=SQLiteStore(sys.argv[1])).run_sync("go")
    print(suspended.status)
'''


class Shell:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "elsewhere" / "runs.db"
        (root / "shop.py").write_text(AGENT_MODULE)

    def suspend(self) -> None:
        agent = runpy.run_path(str(self.root / "shop.py"))["agent"]
        assert agent.clone(store=SQLiteStore(self.db)).run_sync("go").status == "awaiting_approval"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        user = {"LOGNAME": None, "USER": "ada", "LNAME": None, "USERNAME": None}
        return loopstate(*args, "--db", str(self.db), cwd=self.root, env=user)

    def ok(self, *args: str) -> str:
        out = self(*args)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def fails(self, *args: str, code: int = 2) -> str:
        out = self(*args)
        assert out.returncode == code, (args, out.stdout, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        return out.stderr

    def charges(self) -> list[str]:
        log = self.root / "log.txt"
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    shell = Shell(tmp_path)
    shell.suspend()
    return shell


def test_a_run_that_answered_goes_on_with_a_message_from_the_shell(sh: Shell) -> None:
    sh.ok("approve", "run-1", "call_1_1")
    sh.ok("approve", "run-1", "call_1_2")
    assert "status: done" in sh.ok("resume", "run-1", "--agent", "shop:agent")
    again = sh.ok("resume", "run-1", "--agent", "shop:agent", "--message", "thanks\x1b[2J")
    assert "answer: you said: thanks\\x1b[2J" in again  # escaped before the terminal
    assert "done → thinking" in again
    assert "has answered; continue the conversation" in sh.fails(
        "resume", "run-1", "--agent", "shop:agent"
    )
    assert sorted(sh.charges()) == ["charge 5", "charge 7"]  # nothing ran twice


def test_decisions_from_the_shell_apply_at_resume_with_the_store_given_by_db(sh: Shell) -> None:
    assert "approve recorded for call_1_1" in sh.ok("approve", "run-1", "call_1_1")
    sh.ok("edit", "run-1", "call_1_2", "--args", '{"amount": 6}')
    assert sh.charges() == []  # recorded, not applied: nothing runs before resume
    shown = sh.ok("runs", "show", "run-1")
    assert 'call_1_1  charge {"amount": 5}  (approve queued, applies at resume)' in shown
    resumed = sh.ok("resume", "run-1", "--agent", "shop:agent")
    assert "status: done" in resumed
    assert "answer: final: charged 5 | [The reviewer edited the arguments" in resumed
    assert sorted(sh.charges()) == ["charge 5", "charge 6"]  # a batch runs concurrently
    assert not (sh.root / ".loopstate").exists()  # the agent's own default store is unused
    data = json.loads(sh.ok("runs", "show", "run-1", "--json"))
    decided = [t for t in data["transitions"] if t["event"] == "decided"]
    assert [t["actor"] for t in decided] == ["cli:ada"]
    assert (data["status"], data["pending"], data["inbox"]) == ("done", [], [])


def test_a_run_is_listed_and_shown_with_its_transitions_pending_calls_and_history(
    sh: Shell,
) -> None:
    header, row = sh.ok("runs", "list").splitlines()
    assert header.split() == ["RUN", "AGE", "STATUS", "PENDING", "STEPS", "PROMPT"]
    run, age, *rest = row.split()
    assert (run, age[-1], rest) == ("run-1", "s", ["awaiting_approval", "2", "1", "go"])
    done = sh("runs", "list", "--status", "done")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "no runs with status done\n")
    assert json.loads(sh.ok("runs", "list", "--status", "done", "--json")) == []
    shown = sh.ok("runs", "show", "run-1")
    assert "run run-1 (agent): awaiting_approval, 1 steps" in shown
    assert "  user       go\n" in shown
    assert '  assistant  → call_1_1 charge({"amount": 5})\n' in shown
    assert "    1  idle → thinking  [start]" in shown
    assert "    2  thinking → awaiting_approval  [replied]" in shown
    assert "waiting for a decision:" in shown
    data = json.loads(sh.ok("runs", "show", "run-1", "--json"))
    assert [(p["call_id"], p["tool"], p["arguments"], p["reason"]) for p in data["pending"]] == [
        ("call_1_1", "charge", {"amount": 5}, "charge needs approval"),
        ("call_1_2", "charge", {"amount": 7}, "charge needs approval"),
    ]
    assert all({"seq", "source", "target", "event", "at"} <= set(t) for t in data["transitions"])


def test_a_run_held_by_another_process_is_busy_for_every_command(sh: Shell) -> None:
    db = sqlite3.connect(sh.db)
    db.execute("UPDATE runs SET lease_owner = 'other-host:1:x', lease_until = ?",
               (time.time() + 60,))  # fmt: skip
    db.commit()
    db.close()
    for args in (
        ("approve", "run-1", "call_1_1"),
        ("deny", "run-1", "call_1_1", "--reason", "no"),
        ("abort", "run-1", "--reason", "no"),
        ("resume", "run-1", "--agent", "shop:agent"),
    ):
        assert "run run-1 is busy: other-host:1:x holds it" in sh.fails(*args, code=1)
    assert sh.charges() == []


def test_unknown_runs_and_calls_and_ended_runs_are_one_line_errors(sh: Shell) -> None:
    assert "no run 'ghost'" in sh.fails("approve", "ghost", "call_1_1")
    assert "no run 'ghost'" in sh.fails("abort", "ghost", "--reason", "x")
    assert "no run 'ghost'" in sh.fails("resume", "ghost", "--agent", "shop:agent")
    assert "has no call call_9 to decide (pending: call_1_1, call_1_2)" in sh.fails(
        "deny", "run-1", "call_9", "--reason", "x"
    )
    assert "--args is not valid JSON" in sh.fails("edit", "run-1", "call_1_1", "--args", "{")
    assert "not an Agent or a Flow" in sh.fails("resume", "run-1", "--agent", "shop:SCRIPT")
    assert "aborted (aborted: not today)" in sh.ok("abort", "run-1", "--reason", "not today")
    assert "run run-1 is aborted, not awaiting approval" in sh.fails("approve", "run-1", "call_1_1")
    assert "run run-1 has ended (aborted)" in sh.fails("abort", "run-1", "--reason", "again")
    assert "run run-1 has ended (aborted)" in sh.fails("resume", "run-1", "--agent", "shop:agent")
    assert sh.charges() == []


def test_an_edit_that_breaks_the_tools_schema_is_refused_when_recorded(sh: Shell) -> None:
    error = sh.fails("edit", "run-1", "call_1_1", "--args", '{"amount": "five"}')
    assert "edit for call call_1_1 (charge) refused: amount:" in error
    assert json.loads(sh.ok("runs", "show", "run-1", "--json"))["inbox"] == []
    sh.ok("edit", "run-1", "call_1_1", "--args", '{"amount": 4}')  # a corrected decision
    sh.ok("deny", "run-1", "call_1_2", "--reason", "one is enough")
    resumed = sh.ok("resume", "run-1", "--agent", "shop:agent")
    assert "status: done" in resumed
    assert sh.charges() == ["charge 4"]
