"""Remembered rules ("always allow / deny calls matching this rule, for this run"): kept with
the run in a SQLite file, audited with the rule and who gave it, revocable with a record of
who revoked it; and remembered decisions stored before rules existed still load and apply."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support import db_tools as make_tools

from loopstate import (
    Agent,
    Approve,
    DecisionError,
    Deny,
    Rule,
    ScriptedModel,
    SQLiteStore,
)
from loopstate.engine.approval import as_decision
from loopstate.engine.models.scripted import call


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


READS = Rule(name="db-reads", decision="approve", pattern="db_read*")


async def test_calls_matching_a_remembered_rule_are_approved_and_audited_with_the_rule(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    model = script()  # one script, answered across both agents
    first = await Agent(model, make_tools(ran), store=SQLiteStore(db)).run("go")
    store = SQLiteStore(db)  # a fresh connection: only the stored run carries the rule
    agent = Agent(model, make_tools(ran), store=store)
    decision = Approve(remember=READS)
    paused = await agent.resume(first.run_id, {first.pending[0].call_id: decision}, actor="alice")
    assert ran == ["read a", "read b"]  # read b matched the rule; send_mail waits
    assert [p.tool for p in paused.pending] == ["send_mail"]
    state = await store.load(first.run_id)
    (standing,) = state.remembered
    assert (standing.rule, standing.tool, standing.by) == (READS, None, "alice")
    by_call = [c.decided_by for c in state.calls]
    assert by_call == ["alice", "remembered:rule db-reads (given by alice)", None]
    audited = [e for e in paused.events if e.kind == "tool_approval"]
    assert audited[-1].actor == "remembered:rule db-reads (given by alice)"


async def test_revoking_a_rule_is_recorded_and_later_calls_ask_again(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    ran: list[str] = []
    agent = Agent(script(), make_tools(ran), store=store)
    first = await agent.run("go")
    paused = await agent.resume(first.run_id, {first.pending[0].call_id: Approve(remember=READS)})
    forgotten = await agent.forget(first.run_id, rule="db-reads", actor="bob", reason="done")
    (revoked,) = forgotten.remembered  # kept, marked: the audit keeps what was in force
    assert revoked.revoked is not None
    assert (revoked.revoked.by, revoked.revoked.reason) == ("bob", "done")
    assert revoked.revoked.at >= revoked.at
    again = await agent.resume(first.run_id, {paused.pending[0].call_id: Approve()})
    assert [p.tool for p in again.pending] == ["db_read"]  # read c asks again
    with pytest.raises(DecisionError, match="no remembered decision for 'rule db-reads'"):
        await agent.forget(first.run_id, rule="db-reads")
    with pytest.raises(DecisionError, match="a tool or a rule"):
        await agent.forget(first.run_id)


async def test_a_remembered_denial_rule_wins_over_a_remembered_approval() -> None:
    ran: list[str] = []
    no_db = Rule(name="no-db", decision="deny", category="db")
    answers = iter(
        [
            Approve(remember=True),  # always allow db_read ...
            Deny("db is frozen", message="The database is frozen.", remember=no_db),
        ]
    )
    model = ScriptedModel(
        [
            call("db_read", {"table": "a"}),
            call("db_drop", {"table": "a"}),
            call("db_read", {"table": "b"}),
            "done",
        ]
    )
    asked: list[str] = []

    def approver(requests):
        asked.extend(r.tool for r in requests)
        return {r.call_id: next(answers) for r in requests}

    result = await Agent(model, make_tools(ran), approver=approver).run("go")
    assert result.status == "done"
    assert ran == ["read a"]  # ... until the denial rule covers db_read too
    assert asked == ["db_read", "db_drop"]
    assert model.requests[-1].messages[-1].content == "The database is frozen."


def test_a_rule_remembered_with_the_other_decision_is_refused_in_one_line() -> None:
    form = {"kind": "deny", "reason": "no", "remember": READS.model_dump()}
    with pytest.raises(DecisionError) as caught:
        as_decision(form)
    assert "decides 'approve', but it is remembered with 'deny'" in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


async def test_a_remembered_decision_stored_before_rules_existed_still_loads_and_applies(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    model = script()
    first = await Agent(model, make_tools(ran), store=SQLiteStore(db)).run("go")
    # the header as an older loopstate wrote it: a remembered decision had only these keys
    old = {"kind": "remembered", "tool": "db_read", "decision": "approve", "reason": "",
           "by": "cli:carol", "at": 1.0}  # fmt: skip
    with sqlite3.connect(db) as con:
        row = con.execute("SELECT header FROM runs WHERE run_id = ?", (first.run_id,))
        (text,) = row.fetchone()
        header = json.loads(text)
        header["remembered"] = [old]
        con.execute(
            "UPDATE runs SET header = ? WHERE run_id = ?", (json.dumps(header), first.run_id)
        )
    store = SQLiteStore(db)
    agent = Agent(model, make_tools(ran), store=store)
    paused = await agent.resume(first.run_id, {first.pending[0].call_id: Approve()})
    assert ran == ["read a", "read b"]
    assert [p.tool for p in paused.pending] == ["send_mail"]
    state = await store.load(first.run_id)
    assert state.calls[1].decided_by == "remembered:db_read (given by cli:carol)"
    await agent.forget(first.run_id, "db_read", actor="cli:dave")
    assert (await store.load(first.run_id)).remembered[0].revoked is not None


async def test_a_rule_remembered_again_under_its_name_replaces_the_old_one_on_record() -> None:
    ran: list[str] = []
    mail = Rule(name="db-reads", decision="approve", tools=["send_mail"])  # same name
    answers = iter([Approve(remember=READS), Approve(remember=mail), Approve()])
    asked: list[str] = []

    def approver(requests):
        asked.extend(r.tool for r in requests)
        return {r.call_id: next(answers) for r in requests}

    agent = Agent(script(), make_tools(ran), approver=approver)
    result = await agent.run("go")
    assert result.status == "done"
    assert asked == ["db_read", "send_mail", "db_read"]  # read c: the old rule is gone
    state = await agent.store.load(result.run_id)
    old, new = state.remembered
    assert (old.rule, new.rule, new.revoked) == (READS, mail, None)
    assert old.revoked is not None
    assert (old.revoked.by, old.revoked.reason) == ("approver", "replaced by a later decision")


async def test_a_remembered_rule_matching_everything_never_answers_an_external_call() -> None:
    from loopstate.tools.human import ask_person

    everything = Rule(name="all", decision="approve", pattern="*")
    model = ScriptedModel(
        [call("db_read", {"table": "a"}), call("ask_person", {"question": "ok?"}), "done"]
    )
    agent = Agent(model, [*make_tools([]), ask_person])
    first = await agent.run("go")
    paused = await agent.resume(
        first.run_id, {first.pending[0].call_id: Approve(remember=everything)}
    )
    # the rule matches ask_person by name, but a person's answer cannot be approved into being
    assert [(p.tool, p.external) for p in paused.pending] == [("ask_person", True)]
    done = await agent.resume(first.run_id, results={paused.pending[0].call_id: "fine"})
    assert (done.status, model.requests[-1].messages[-1].content) == ("done", "fine")
