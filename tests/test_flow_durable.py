"""A coaching conversation spread over processes: each turn is a new process on one SQLite
file, hours apart; nothing before the resume point runs again."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import forking

from loopstate import Approve, MemoryStore, ScriptedModel
from loopstate.engine.errors import RunNotResumable
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.machines.coaching import coaching_flow

CHILD = Path(__file__).parent / "flow_child.py"
HOUR = 3600.0


def child(db: Path, *argv: str, at: float) -> dict[str, Any]:
    done = forking.run(
        [sys.executable, str(CHILD), str(db), *argv, "--at", str(at)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reply: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return reply


async def test_a_user_who_answers_hours_later_in_another_process_continues_the_run(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    first = child(db, "run", "I want to run a 4:25 1500m", at=1_000)
    assert (first["status"], first["phase"]) == ("awaiting_input", "intake")
    listed = await SQLiteStore(db).list_runs(status="awaiting_input")
    assert [r.run_id for r in listed] == ["coach-1"]

    second = child(
        db, "reply", "43, 70 km a week, 5 days, a stress fracture last year", at=1_000 + 5 * HOUR
    )
    assert (second["status"], second["phase"], second["pending"]) == (
        "awaiting_approval",
        "plan",
        ["generate_plan"],
    )
    third = child(db, "approve", at=1_000 + 6 * HOUR)
    assert (third["status"], third["phase"]) == ("awaiting_input", "present")
    final = child(db, "reply", "Looks great", at=1_000 + 30 * HOUR)
    assert (final["status"], final["phase"]) == ("done", "done")
    assert final["data"]["answers"]["age"] == 43

    state = await SQLiteStore(db).load("coach-1")
    assert state.steps == 8  # every model turn ran exactly once across four processes
    replies = [t for t in state.transitions if t.event == "user_replied"]
    assert [(t.actor, t.at) for t in replies] == [
        ("user", 1_000 + 5 * HOUR),
        ("user", 1_000 + 30 * HOUR),
    ]
    assert [m.content for m in state.messages if m.role == "user"] == [
        "I want to run a 4:25 1500m",
        "43, 70 km a week, 5 days, a stress fracture last year",
        "Looks great",
    ]


async def test_a_run_waiting_for_the_user_refuses_decisions_and_an_empty_resume() -> None:
    model = ScriptedModel(["What is your goal?"])
    models = {"default": model, "analyst": model, "plan": model}
    flow = coaching_flow(models=models, store=MemoryStore())
    result = await flow.run("hi")
    assert (result.status, result.phase) == ("awaiting_input", "goal_capture")
    with pytest.raises(RunNotResumable, match="waits for the user"):
        await flow.resume(result.run_id)
    with pytest.raises(RunNotResumable, match="not awaiting approval"):
        await flow.resume(result.run_id, decisions={"call_1_1": Approve()})
    aborted = await flow.abort(result.run_id, "user left")
    assert (aborted.status, aborted.phase, aborted.stop_reason) == (
        "aborted",
        "aborted",
        "aborted: user left",
    )
