"""The CLI on one SQLite file, from other processes and in this one: `approve|deny --always`
(a tool or a rule), `deny --message` (the exact text the model sees), `forget` (revocation
recorded, later calls ask again), and one clear line for every mistake."""

from __future__ import annotations

import subprocess
from pathlib import Path

import support.cli
from support import db_tools as make_tools

from loopstate import Agent, ScriptedModel, SQLiteStore
from loopstate.engine.models.scripted import call


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return support.cli.loopstate(*args, cwd=db.parent, env={"LOOPSTATE_DB": str(db)})


def cli_process(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return support.cli.loopstate_process(*args, cwd=db.parent, env={"LOOPSTATE_DB": str(db)})


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr
    return out.stderr


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            call("db_read", {"table": "a"}),
            call("db_read", {"table": "b"}),
            call("send_mail", {"to": "x@y.z"}),
            call("db_read", {"table": "c"}),
            "done",
        ]
    )


async def test_a_rule_remembered_from_the_cli_decides_and_forget_records_its_revocation(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    model = script()
    agent = Agent(model, make_tools(ran), store=SQLiteStore(db))
    first = await agent.run("go")
    call_id = first.pending[0].call_id
    out = ok(cli_process(db, "approve", first.run_id, call_id, "--always", "--pattern", "db_*",
                         "--rule", "db-any", "--actor", "alice"))  # fmt: skip
    assert "remembered as rule 'db-any'" in out
    paused = await agent.resume(first.run_id)
    assert ran == ["read a", "read b"]
    assert [p.tool for p in paused.pending] == ["send_mail"]
    state = await agent.store.load(first.run_id)
    assert state.calls[1].decided_by == "remembered:rule db-any (given by alice)"

    out = ok(cli_process(db, "forget", first.run_id, "--rule", "db-any", "--actor", "bob",
                         "--reason", "read enough"))  # fmt: skip
    assert "revoked the remembered decision for rule db-any (given by alice)" in out
    shown = ok(cli_process(db, "runs", "show", first.run_id))
    assert "revoked by bob" in shown
    assert "read enough" in shown
    ok(cli(db, "approve", first.run_id, paused.pending[0].call_id))
    again = await agent.resume(first.run_id)
    assert [p.tool for p in again.pending] == ["db_read"]  # read c asks again
    assert ran == ["read a", "read b", "mail x@y.z"]


async def test_deny_always_with_a_message_is_what_the_model_sees_for_every_later_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    model = script()
    agent = Agent(model, make_tools(ran), store=SQLiteStore(db))
    first = await agent.run("go")
    ok(cli(db, "deny", first.run_id, first.pending[0].call_id, "--always",
           "--reason", "no db today", "--message", "The database is closed."))  # fmt: skip
    paused = await agent.resume(first.run_id)
    assert [p.tool for p in paused.pending] == ["send_mail"]
    seen = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert seen == ["The database is closed.", "The database is closed."]
    assert ran == []
    state = await agent.store.load(first.run_id)
    assert [getattr(c.decision, "reason", None) for c in state.calls[:2]] == ["no db today"] * 2


async def test_cli_mistakes_about_standing_decisions_are_one_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent = Agent(script(), make_tools([]), store=SQLiteStore(db))
    first = await agent.run("go")
    run, call_id = first.run_id, first.pending[0].call_id
    assert "no remembered decision for 'db_read'" in one_line_error(
        cli(db, "forget", run, "db_read")
    )
    assert "one of the two" in one_line_error(cli(db, "forget", run, "db_read", "--rule", "x"))
    assert "--pattern needs --always" in one_line_error(
        cli(db, "approve", run, call_id, "--pattern", "db_*")
    )
    assert "--rule needs --pattern" in one_line_error(
        cli(db, "approve", run, call_id, "--always", "--rule", "x")
    )
    # nothing was queued by the refused commands: the call can still be decided
    ok(cli(db, "approve", run, call_id, "--always"))
    assert (await agent.store.load(run)).inbox[0].decision.remember is True
