"""Approval policies through the public API: rules over a toolset, a category or a name
pattern; chained approvers (first that decides wins, a policy passes what it does not match);
the rule named in the audit; a description and metadata set by the tool's predicate."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate import (
    Agent,
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    Deny,
    Gate,
    Rule,
    ScriptedModel,
    SQLiteStore,
    chain_approvers,
    tool,
)
from loopstate.engine.models.scripted import call, calls


def make_tools(ran: list[str]):
    @tool(needs_approval=True, category="read")
    def db_read(table: str) -> str:
        """Read a table."""
        ran.append("db_read")
        return f"rows of {table}"

    @tool(needs_approval=True, category="write")
    def db_drop(table: str) -> str:
        """Drop a table."""
        ran.append("db_drop")
        return f"dropped {table}"

    @tool(needs_approval=True, category="write")
    def send_mail(to: str) -> str:
        """Send mail."""
        ran.append("send_mail")
        return f"sent to {to}"

    return [db_read, db_drop, send_mail]


def three_calls() -> ScriptedModel:
    return ScriptedModel(
        [
            calls(
                call("db_read", {"table": "users"}),
                call("db_drop", {"table": "users"}),
                call("send_mail", {"to": "a@b.c"}),
            ),
            "done",
        ]
    )


async def test_rules_by_category_and_pattern_decide_and_the_audit_names_the_rule(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    policy = ApprovalPolicy(
        Rule(name="reads-ok", decision="approve", category="read"),
        Rule(name="no-db-writes", decision="deny", pattern="db_*", reason="no DDL"),
    )
    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(three_calls(), make_tools(ran), approver=policy, store=store)
    first = await agent.run("go")
    # the policy passed send_mail on: nobody decided it, so the run waits for a person
    assert first.status == "awaiting_approval"
    assert [p.tool for p in first.pending] == ["send_mail"]
    state = await store.load(first.run_id)
    by_tool = {c.tool: c for c in state.calls}
    assert by_tool["db_read"].decided_by == "approver:reads-ok"
    assert by_tool["db_drop"].decided_by == "approver:no-db-writes"
    assert by_tool["db_drop"].status == "denied"
    done = await agent.resume(first.run_id, {first.pending[0].call_id: Approve()})
    assert done.status == "done"
    assert ran == ["db_read", "send_mail"]


async def test_a_chain_asks_in_turn_and_the_first_that_decides_wins() -> None:
    ran: list[str] = []
    tools = make_tools(ran)
    asked: list[list[str]] = []

    def person(requests: list[ApprovalRequest]):
        asked.append([r.tool for r in requests])
        return {r.call_id: Approve() for r in requests}

    approver = chain_approvers(
        ApprovalPolicy(Rule(name="never-drop", decision="deny", tools=[tools[1]])),
        ApprovalPolicy(Rule(name="reads", decision="approve", tools=["db_read"])),
        person,
    )
    result = await Agent(three_calls(), tools, approver=approver).run("go")
    assert result.status == "done"
    assert asked == [["send_mail"]]  # the person saw only what no policy decided
    assert sorted(ran) == ["db_read", "send_mail"]


def test_a_rule_that_selects_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="must select tools, a category or a pattern"):
        Rule(name="all", decision="approve")


async def test_a_predicate_describes_the_request_with_a_description_and_metadata() -> None:
    @tool(
        needs_approval=lambda a: (
            Gate(description=f"pay {a.amount} to {a.to}", metadata={"risk": "high"})
            if a.amount > 100
            else False
        )
    )
    def pay(amount: int, to: str) -> str:
        """Pay."""
        return "paid"

    model = ScriptedModel([calls(call("pay", {"amount": 500, "to": "bob"})), "ok"])
    seen: list[ApprovalRequest] = []

    def approver(requests: list[ApprovalRequest]):
        seen.extend(requests)
        return {r.call_id: Deny("too much") for r in requests}

    await Agent(model, [pay], approver=approver).run("go")
    assert [(r.reason, r.metadata, r.category) for r in seen] == [
        ("pay 500 to bob", {"risk": "high"}, "general")
    ]
