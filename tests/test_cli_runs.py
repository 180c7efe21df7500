"""`loopstate runs|approve|deny|edit|abort|resume` against a store file given with --db,
run for real in subprocesses; the agent resumed by the CLI has its store replaced by --db."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
        out = subprocess.run([sys.executable, "shop.py", str(self.db)], cwd=self.root,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert out.stdout.strip() == "awaiting_approval", out.stderr

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "loopstate", *args, "--db", str(self.db)],
            capture_output=True,
            text=True,
            cwd=self.root,
            env={"PYTHONPATH": str(self.root), "PATH": "/usr/bin:/bin", "USER": "ada"},
            timeout=60,
        )

    def ok(self, *args: str) -> str:
        out = self(*args)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def fails(self, *args: str) -> str:
        out = self(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
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
    assert 'call_1_1  charge {"amount": 5}  (decided: approve)' in shown
    resumed = sh.ok("resume", "run-1", "--agent", "shop:agent")
    assert "status: done" in resumed
    assert "answer: final: charged 5 | [The reviewer edited the arguments" in resumed
    assert sorted(sh.charges()) == ["charge 5", "charge 6"]  # a batch runs concurrently
    assert not (sh.root / ".loopstate").exists()  # the agent's own default store is unused
    data = json.loads(sh.ok("runs", "show", "run-1", "--json"))
    decided = [t for t in data["transitions"] if t["event"] == "decided"]
    assert [t["actor"] for t in decided] == ["cli:ada"]
    assert (data["status"], data["pending"], data["queued_decisions"]) == ("done", [], [])


def test_a_run_is_listed_and_shown_with_its_transitions_pending_calls_and_history(
    sh: Shell,
) -> None:
    listed = sh.ok("runs", "list")
    assert listed.split() == ["run-1", "awaiting_approval", "awaiting_approval", "steps", "1",
                              "2", "pending"]  # fmt: skip
    assert sh.ok("runs", "list", "--status", "done") == "no runs\n"
    assert json.loads(sh.ok("runs", "list", "--status", "done", "--json")) == []
    shown = sh.ok("runs", "show", "run-1")
    assert "run run-1 (agent): awaiting_approval, state awaiting_approval" in shown
    assert "history: {'user': 1, 'assistant': 1}; steps 1" in shown
    assert "1 idle → thinking [start]" in shown
    assert "2 thinking → awaiting_approval [replied]" in shown
    assert "pending approvals:" in shown
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
        assert "run run-1 is busy: other-host:1:x holds it" in sh.fails(*args)
    assert sh.charges() == []


def test_unknown_runs_and_calls_and_ended_runs_are_one_line_errors(sh: Shell) -> None:
    assert "no run 'ghost'" in sh.fails("approve", "ghost", "call_1_1")
    assert "no run 'ghost'" in sh.fails("abort", "ghost", "--reason", "x")
    assert "no run 'ghost'" in sh.fails("resume", "ghost", "--agent", "shop:agent")
    assert "has no call call_9 (pending: call_1_1, call_1_2)" in sh.fails(
        "deny", "run-1", "call_9", "--reason", "x"
    )
    assert "--args is not valid JSON" in sh.fails("edit", "run-1", "call_1_1", "--args", "{")
    assert "not an Agent or a Flow" in sh.fails("resume", "run-1", "--agent", "shop:SCRIPT")
    assert "aborted (aborted: not today)" in sh.ok("abort", "run-1", "--reason", "not today")
    assert "run run-1 is aborted, not awaiting approval" in sh.fails("approve", "run-1", "call_1_1")
    assert "run run-1 has ended (aborted)" in sh.fails("abort", "run-1", "--reason", "again")
    assert "run run-1 has ended (aborted)" in sh.fails("resume", "run-1", "--agent", "shop:agent")
    assert sh.charges() == []
