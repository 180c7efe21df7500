"""A stored run's diagram (`loopstate diagram --run`, the run page's) shows where its limits
took it: the expiry of an approval deadline as a transition taken, with actor `deadline`, and
a run resting at its budget in `budget_exceeded`, drawn as its current state."""

from __future__ import annotations

from pathlib import Path

import deadline_agent
import pytest
from support.cli import loopstate

from loopstate import Agent, Budget, ScriptedModel, SQLiteStore, tool
from loopstate.engine.deadlines import expire_due
from loopstate.engine.models.scripted import call


@pytest.fixture
def clock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The deadline agent's clock, at 1000 s."""
    path = tmp_path / "clock"
    deadline_agent.set_clock(path, 1000)
    monkeypatch.setenv("LOOPSTATE_TEST_CLOCK", str(path))
    return path


def drawn(db: Path, run_id: str, cwd: Path, *fmt: str) -> str:
    done = loopstate("diagram", "--run", run_id, "--db", str(db), *fmt, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_stored_runs_overlay_shows_its_expired_approval(
    tmp_path: Path, clock_file: Path
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    agent = deadline_agent.agent(store)
    waiting = await agent.run("send the report")
    deadline_agent.set_clock(clock_file, 1002)
    assert await expire_due(store, clock=deadline_agent.clock) == 1
    done = await agent.resume(waiting.run_id)
    assert done.status == "done"
    store.close()
    mermaid = drawn(db, waiting.run_id, tmp_path)
    assert "awaiting_approval --> executing_tool : expired ×1" in mermaid
    assert "executing_tool : decided ×" not in mermaid  # no one decided it
    dot = drawn(db, waiting.run_id, tmp_path, "--format", "dot")
    assert "expired ×1" in dot


@tool
def look(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_a_stored_run_at_its_budget_is_drawn_resting_in_budget_exceeded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    model = ScriptedModel([call("look", {"key": "a"}), "never asked"])
    agent = Agent(model, [look], store=store, budget=Budget(model_calls=1))
    stopped = await agent.run("look it up")
    assert stopped.status == "failed"
    store.close()
    mermaid = drawn(db, stopped.run_id, tmp_path)
    assert "thinking --> budget_exceeded : over_budget ×1" in mermaid
    assert "class budget_exceeded current" in mermaid
