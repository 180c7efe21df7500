"""Durable runs across real processes: suspend, resume, SIGKILL at every boundary, leases."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support import forking

CHILD = Path(__file__).with_name("durable_child.py")


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "runs.db"

    def start(self, mode: str, *extra: str) -> subprocess.Popen[str]:
        return forking.Popen(
            [sys.executable, str(CHILD), str(self.db), str(self.root), mode, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def child(self, mode: str, *extra: str) -> dict[str, object]:
        proc = self.start(mode, *extra)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        return result

    def killed(self, mode: str, point: str, *extra: str) -> None:
        proc = self.start(mode, "--kill", point, *extra)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, f"did not die at {point}: {err}"

    def log(self) -> Counter[str]:
        path = self.root / "log.txt"
        return Counter(path.read_text().splitlines()) if path.exists() else Counter()

    def transitions(self) -> list[tuple[str, str, str, str | None]]:
        db = sqlite3.connect(self.db)
        rows = db.execute("SELECT body FROM transitions ORDER BY seq").fetchall()
        return [
            (t["source"], t["target"], t["event"], t.get("actor"))
            for t in (json.loads(r[0]) for r in rows)
        ]


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


APPROVE = json.dumps({"call_1_2": ["approve"]})


def test_a_suspended_run_resumes_in_another_process_with_nothing_run_twice(h: Harness) -> None:
    first = h.child("run")
    first.pop("requests")
    assert first == {"status": "awaiting_approval", "output": None, "stop_reason": None,
                     "pending": ["call_1_2"]}  # fmt: skip
    assert h.log() == {"model 1": 1}  # nothing in the batch runs before all is decided
    done = h.child("resume", "--decide", APPROVE)
    assert done["status"] == "done"
    assert h.log() == {"model 1": 1, "model 2": 1, "model 3": 1, "tool put k1": 1,
                       "tool charge 5": 1, "tool put k2": 1}  # fmt: skip
    assert "charged 5" in str(done["output"])


def test_a_denial_from_another_process_reaches_the_model(h: Harness) -> None:
    h.child("run")
    done = h.child("resume", "--decide", json.dumps({"call_1_2": ["deny", "over budget"]}))
    assert done["status"] == "done"
    assert "over budget" in str(done["output"])
    assert h.log()["tool charge 5"] == 0


def test_a_second_use_of_a_decision_is_refused_and_changes_nothing(h: Harness) -> None:
    h.child("run")
    h.child("resume", "--decide", APPROVE)
    again = h.child("resume", "--decide", APPROVE)
    assert again["error"] == "RunNotResumable"
    assert h.log()["tool charge 5"] == 1


def test_an_aborted_suspended_run_makes_no_further_model_call(h: Harness) -> None:
    h.child("run")
    aborted = h.child("abort")
    assert (aborted["status"], aborted["stop_reason"]) == ("aborted", "aborted: changed my mind")
    assert h.log() == {"model 1": 1}
    assert h.transitions()[-1] == ("awaiting_approval", "aborted", "abort", "test")
    assert h.child("resume", "--decide", APPROVE)["error"] == "RunNotResumable"


@pytest.mark.parametrize(
    ("point", "model_calls"),
    [
        ("before_model_1", {"model 1": 1}),  # died before asking: asked once, on resume
        ("after_model_unsaved_1", {"model 1": 2}),  # reply not saved: asked again
        ("saved_thinking_awaiting_approval", {"model 1": 1}),  # reply saved: never again
    ],
)
def test_a_kill_around_the_model_call_loses_no_reply_that_was_saved(
    h: Harness, point: str, model_calls: dict[str, int]
) -> None:
    h.killed("run", point)
    suspended = h.child("resume")
    assert suspended["status"] == "awaiting_approval"
    assert h.log() == model_calls
    assert h.child("resume", "--decide", APPROVE)["status"] == "done"
    assert h.log()["tool charge 5"] == 1


def test_a_kill_while_waiting_for_a_decision_loses_nothing(h: Harness) -> None:
    h.killed("run", "while_waiting")
    assert h.child("resume", "--decide", APPROVE)["status"] == "done"
    assert h.log()["model 1"] == 1
    assert h.log()["tool charge 5"] == 1


@pytest.mark.parametrize(
    ("point", "decide_again", "charges", "told"),
    [
        # the decision was not saved yet: the run is still waiting for it
        ("decided_unsaved", True, 1, "charged 5"),
        # decision and intent are saved in one commit, before the call starts: from then on
        # a crash cannot be told apart from one during the call, so it is reported, not rerun
        ("saved_awaiting_approval_executing_tool", False, 0, "interrupted, outcome unknown"),
        ("before_tool_charge", False, 0, "interrupted, outcome unknown"),
    ],
)
def test_a_kill_before_a_tool_ran_never_runs_it_twice(
    h: Harness, point: str, decide_again: bool, charges: int, told: str
) -> None:
    h.child("run")
    h.killed("resume", point, "--decide", APPROVE)
    done = h.child("resume", *(["--decide", APPROVE] if decide_again else []))
    assert done["status"] == "done"
    assert h.log()["tool charge 5"] == charges
    assert told in str(done["output"])


def test_a_tool_killed_mid_run_is_reported_as_interrupted_never_run_twice(h: Harness) -> None:
    h.child("run")
    h.killed("resume", "during_tool", "--decide", APPROVE)
    assert h.log()["tool charge 5"] == 1
    done = h.child("resume")
    assert done["status"] == "done"
    assert h.log()["tool charge 5"] == 1
    assert "interrupted, outcome unknown" in str(done["output"])


def test_an_idempotent_tool_killed_mid_run_is_run_again(h: Harness) -> None:
    h.child("run")
    h.child("resume", "--decide", APPROVE)  # step 1 done; step 2 calls put k2
    h2 = Harness(h.root / "again")
    h2.root.mkdir()
    h2.child("run")
    h2.killed("resume", "during_idempotent", "--decide", APPROVE)
    assert h2.log()["tool put k1"] == 1
    done = h2.child("resume")
    assert done["status"] == "done"
    assert h2.log()["tool put k1"] == 2  # idempotent: safe to run again
    assert h2.log()["tool charge 5"] == 1


def test_a_kill_after_a_tool_result_was_saved_keeps_the_result(h: Harness) -> None:
    h.child("run")
    h.killed("resume", "after_tool_saved_charge", "--decide", APPROVE)
    done = h.child("resume")
    assert done["status"] == "done"
    assert h.log()["tool charge 5"] == 1
    assert "charged 5" in str(done["output"])


def test_a_kill_after_a_tool_ran_but_before_its_result_was_saved_is_interrupted(
    h: Harness,
) -> None:
    h.child("run")
    h.killed("resume", "after_tool_unsaved_charge", "--decide", APPROVE)
    done = h.child("resume")
    assert h.log()["tool charge 5"] == 1
    assert "interrupted, outcome unknown" in str(done["output"])


def test_interrupted_calls_can_be_put_to_a_person_again_by_policy(h: Harness) -> None:
    h.child("run")
    h.killed("resume", "during_tool", "--decide", APPROVE)
    asked = h.child("resume", "--ask-again")
    assert (asked["status"], asked["pending"]) == ("awaiting_approval", ["call_1_2"])
    assert ("executing_tool", "awaiting_approval", "reapprove", "system") in h.transitions()
    done = h.child("resume", "--decide", json.dumps({"call_1_2": ["deny", "already charged"]}))
    assert done["status"] == "done"
    assert h.log()["tool charge 5"] == 1


def test_two_processes_resuming_at_once_one_proceeds_the_other_is_told_busy(h: Harness) -> None:
    h.child("run")
    release = h.root / "release"
    holder = h.start("resume", "--decide", APPROVE, "--release", str(release))
    try:
        deadline = time.monotonic() + 120  # a margin for a stuck child, not a time relied on
        while "tool charge 5" not in h.log() and time.monotonic() < deadline:
            time.sleep(0.01)
        other = h.child("resume", "--decide", APPROVE)
        assert other["error"] == "RunBusy"
        assert "run run-1 is busy" in str(other["message"])
    finally:
        release.touch()  # the holder's charge ends only now, however long the other one took
        out, _ = holder.communicate(timeout=300)
    assert json.loads(out.strip().splitlines()[-1])["status"] == "done"
    assert h.log()["tool charge 5"] == 1


def test_a_crashed_holder_on_this_host_does_not_block_resume(h: Harness) -> None:
    h.child("run")
    h.killed("resume", "during_tool", "--decide", APPROVE)  # its lease has 60 s to run
    assert h.child("resume")["status"] == "done"  # the holder's pid is gone: taken over


def test_a_lease_held_elsewhere_blocks_until_it_expires(h: Harness) -> None:
    h.child("run")
    db = sqlite3.connect(h.db)
    # a lease long enough that a loaded machine starting the child cannot outlive it
    db.execute(
        "UPDATE runs SET lease_owner = 'other-host:1:x', lease_until = ?", (time.time() + 60,)
    )
    db.commit()
    busy = h.child("resume", "--decide", APPROVE)
    assert busy["error"] == "RunBusy"
    assert "other-host:1:x holds it" in str(busy["message"])
    db.execute("UPDATE runs SET lease_until = ?", (time.time() - 0.01,))  # it lapses
    db.commit()
    assert h.child("resume", "--decide", APPROVE)["status"] == "done"


def test_every_transition_is_recorded_with_sequence_time_reason_and_actor(h: Harness) -> None:
    h.child("run")
    h.child("resume", "--decide", json.dumps({"call_1_2": ["deny", "no"]}))
    db = sqlite3.connect(h.db)
    rows = [json.loads(r[0]) for r in db.execute("SELECT body FROM transitions ORDER BY seq")]
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["at"] > 1_600_000_000 for r in rows)
    decided = next(r for r in rows if r["event"] == "decided")
    assert decided["actor"] == "test"
    assert rows[-1]["target"] == "done"
