"""Tools whose result comes from outside (`@tool(external=True)`): no body runs here; the run
suspends durably until the result is supplied — by `resume(results=...)` or by the CLI in
another process on one SQLite file — validated against the declared result type."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli import loopstate_process

from loopstate import Agent, Approve, DecisionError, ScriptedModel, SQLiteStore, tool
from loopstate.engine.approval import Result
from loopstate.engine.models.scripted import call
from loopstate.tools.human import ask_person


def make_tools(ran: list[str]):
    @tool(external=True)
    def ask_person(question: str) -> int:
        """Ask a person a question; they answer with a number."""
        ran.append("body")  # must never run
        return 0

    return [ask_person]


def asking() -> ScriptedModel:
    return ScriptedModel([call("ask_person", {"question": "how many?"}), "thanks"])


async def test_an_external_call_suspends_and_resume_supplies_a_validated_result() -> None:
    ran: list[str] = []
    approved: list[str] = []

    def approver(requests):  # approves everything it is asked: it is not asked for a result
        approved.extend(r.tool for r in requests)
        return {r.call_id: Approve() for r in requests}

    model = asking()
    agent = Agent(model, make_tools(ran), approver=approver, auto_approve=False)
    first = await agent.run("go")
    assert first.status == "awaiting_approval"
    (pending,) = first.pending
    assert (pending.tool, pending.external, approved) == ("ask_person", True, [])
    with pytest.raises(DecisionError, match=r"result for call .* refused"):
        await agent.resume(first.run_id, results={pending.call_id: "lots"})
    with pytest.raises(DecisionError, match="does not accept 'approve'"):
        await agent.resume(first.run_id, {pending.call_id: Approve()})
    done = await agent.resume(first.run_id, results={pending.call_id: 7})
    assert (done.status, done.output, ran) == ("done", "thanks", [])
    assert model.requests[1].messages[-1].content == "7"


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return loopstate_process(*args, cwd=db.parent, env={"LOOPSTATE_DB": str(db)})


async def test_the_cli_in_another_process_answers_ask_person(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    model = ScriptedModel([call("ask_person", {"question": "ship it?"}), "shipping"])
    first = await Agent(model, [ask_person], store=SQLiteStore(db)).run("go")
    (pending,) = first.pending
    assert (pending.tool, pending.external) == ("ask_person", True)
    bad = cli(db, "result", first.run_id, pending.call_id, "--value", "12")
    assert bad.returncode == 2
    assert "refused" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = cli(db, "result", first.run_id, pending.call_id, "--value", json.dumps("yes, ship"))
    assert good.returncode == 0, good.stderr
    done = await Agent(model, [ask_person], store=SQLiteStore(db)).resume(first.run_id)
    assert (done.status, done.output) == ("done", "shipping")
    assert model.requests[1].messages[-1].content == "yes, ship"
    state = await SQLiteStore(db).load(first.run_id)
    assert state.calls[0].decided_by is not None
    assert state.calls[0].decided_by.startswith("cli:")


async def test_an_approver_cannot_fabricate_the_result_of_a_tool_that_is_not_external() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Transfer money."""
        ran.append("transfer")
        return "sent"

    def approver(requests):
        return {r.call_id: Result("sent") for r in requests}

    model = ScriptedModel([call("transfer", {"amount": 9}), "done"])
    with pytest.raises(DecisionError, match="transfer does not accept 'result'"):
        await Agent(model, [transfer], approver=approver).run("go")
    assert ran == []
