"""Resuming with an agent that cannot continue the run (a pending call's tool missing, other
instructions) is refused before anything changes, saying what the run needs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from loopstate import Agent, Approve, RunNotResumable, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call


@tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid"


def shop(db: Path, *tools: object, instructions: str = "You run the shop.") -> Agent:
    script = ScriptedModel([call("refund", {"order": "A1"}), "Refunded."], by_step=True)
    return Agent(script, list(tools) or [refund, lookup], instructions=instructions,  # type: ignore[arg-type]
                 store=SQLiteStore(db), ids=lambda: "run-1")  # fmt: skip


def stored(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return (
            conn.execute("SELECT * FROM runs").fetchall()
            + conn.execute("SELECT * FROM calls").fetchall()
        )


async def test_an_agent_without_the_pending_calls_tool_is_refused_and_the_run_is_unchanged(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    first = await shop(db).run("refund A1")
    assert first.status == "awaiting_approval"
    before = stored(db)
    with pytest.raises(RunNotResumable, match=r"needs the tools refund .* lacks refund"):
        await shop(db, lookup).resume("run-1", decisions={"call_1_1": Approve()})
    assert stored(db)[1:] == before[1:]  # the calls and their decisions: untouched
    done = await shop(db).resume("run-1", decisions={"call_1_1": Approve()})
    assert (done.status, done.output) == ("done", "Refunded.")


async def test_an_agent_with_other_instructions_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    await shop(db).run("refund A1")
    with pytest.raises(RunNotResumable, match="started with other instructions"):
        await shop(db, instructions="Be generous.").resume("run-1")
    assert (await shop(db).resume("run-1", decisions={"call_1_1": Approve()})).status == "done"
