"""What a tool lets a reviewer decide, and the exact text the model sees on a denial — on
every path: an approver, `resume`, and the CLI in another process on one SQLite file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli import loopstate_process

from loopstate import Agent, Approve, DecisionError, Deny, Edit, ScriptedModel, tool
from loopstate.engine.errors import DefinitionError
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore


def make_deploy(ran: list[str]):
    @tool(needs_approval=True, allowed_decisions=("approve", "deny"))
    def deploy(env: str) -> str:
        """Deploy to an environment."""
        ran.append(env)
        return f"deployed {env}"

    return deploy


async def test_an_edit_of_a_tool_that_forbids_edits_is_refused_from_an_approver() -> None:
    ran: list[str] = []

    def approver(requests):
        assert requests[0].allowed == ("approve", "deny", "abort")
        return {r.call_id: Edit({"env": "staging"}) for r in requests}

    model = ScriptedModel([call("deploy", {"env": "prod"}), "ok"])
    agent = Agent(model, [make_deploy(ran)], approver=approver)
    with pytest.raises(DecisionError, match="deploy does not accept 'edit'"):
        await agent.run("go")
    assert ran == []


async def test_resume_refuses_a_forbidden_edit_and_the_run_stays_decidable() -> None:
    ran: list[str] = []
    model = ScriptedModel([call("deploy", {"env": "prod"}), "ok"])
    agent = Agent(model, [make_deploy(ran)])
    first = await agent.run("go")
    call_id = first.pending[0].call_id
    with pytest.raises(DecisionError, match="allowed: approve, deny, abort"):
        await agent.resume(first.run_id, {call_id: Edit({"env": "dev"})})
    done = await agent.resume(first.run_id, {call_id: Approve()})
    assert (done.status, ran) == ("done", ["prod"])


def test_allowed_decisions_are_checked_when_the_tool_is_defined() -> None:
    with pytest.raises(DefinitionError, match="allowed_decisions has 'maybe'"):

        @tool(allowed_decisions=("approve", "maybe"))
        def nothing() -> str:
            """Nothing."""
            return ""


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return loopstate_process(*args, cwd=db.parent, env={"LOOPSTATE_DB": str(db)})


async def test_the_cli_in_another_process_cannot_queue_a_forbidden_edit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    model = ScriptedModel([call("deploy", {"env": "prod"}), "ok"])
    agent = Agent(model, [make_deploy(ran)], store=SQLiteStore(db))
    first = await agent.run("go")
    call_id = first.pending[0].call_id
    edit = cli(db, "edit", first.run_id, call_id, "--args", json.dumps({"env": "dev"}))
    assert edit.returncode == 2
    assert "deploy does not accept 'edit'" in edit.stderr
    assert "Traceback" not in edit.stderr
    assert len(edit.stderr.strip().splitlines()) == 1
    deny = cli(db, "deny", first.run_id, call_id, "--reason", "not today")
    assert deny.returncode == 0, deny.stderr
    done = await agent.resume(first.run_id)
    assert (done.status, ran) == ("done", [])


async def test_a_denial_message_is_exactly_what_the_model_sees_and_the_reason_is_audited() -> None:
    ran: list[str] = []
    model = ScriptedModel([call("deploy", {"env": "prod"}), "ok"])

    def approver(requests):
        return {r.call_id: Deny("freeze week", message="Deploys are frozen.") for r in requests}

    agent = Agent(model, [make_deploy(ran)], approver=approver)
    result = await agent.run("go")
    assert model.requests[1].messages[-1].content == "Deploys are frozen."
    assert ran == []
    (record,) = (await agent.store.load(result.run_id)).calls
    assert (record.status, getattr(record.decision, "reason", None)) == ("denied", "freeze week")


async def test_a_run_wide_denial_formatter_writes_every_other_denial() -> None:
    model = ScriptedModel([call("deploy", {"env": "prod"}), "ok"])

    def approver(requests):
        return {r.call_id: Deny("no") for r in requests}

    agent = Agent(
        model,
        [make_deploy([])],
        approver=approver,
        denial_message=lambda record, deny: f"{record.tool} refused ({deny.reason}); ask a human",
    )
    await agent.run("go")
    assert model.requests[1].messages[-1].content == "deploy refused (no); ask a human"
