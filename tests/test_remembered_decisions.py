"""Remembered decisions ("always allow / always deny this tool for this run"): stored with
the run, audited as remembered, revocable; and data a decision gives the tool, never the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate import (
    Agent,
    Approve,
    DecisionError,
    Deny,
    Edit,
    ScriptedModel,
    SQLiteStore,
    ToolContext,
    tool,
)
from loopstate.engine.models.scripted import call


def make_tools(ran: list[str]):
    @tool(needs_approval=True)
    def write(path: str) -> str:
        """Write a file."""
        ran.append(path)
        return f"wrote {path}"

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        ran.append(f"pay {amount}")
        return "paid"

    return [write, pay]


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            call("write", {"path": "a"}),
            call("write", {"path": "b"}),
            call("pay", {"amount": 5}),
            call("write", {"path": "c"}),
            "done",
        ]
    )


async def test_always_allow_is_kept_with_the_run_audited_and_revocable(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    model = script()
    first = await Agent(model, make_tools(ran), store=SQLiteStore(db)).run("go")
    # another agent on a fresh connection to the same file: only the stored run carries it
    store = SQLiteStore(db)
    agent = Agent(model, make_tools(ran), store=store)
    paused = await agent.resume(first.run_id, {first.pending[0].call_id: Approve(remember=True)})
    assert [p.tool for p in paused.pending] == ["pay"]  # write b went through, pay waits
    assert ran == ["a", "b"]
    state = await store.load(first.run_id)
    assert [(r.tool, r.decision, r.by) for r in state.remembered] == [
        ("write", "approve", "resume")
    ]
    remembered = "remembered:write (given by resume)"
    assert [c.decided_by for c in state.calls] == ["resume", remembered, None]
    decided = [t for t in state.transitions if t.event == "decided"]
    assert decided[-1].actor == remembered

    await agent.forget(first.run_id, "write")
    again = await agent.resume(first.run_id, {paused.pending[0].call_id: Approve()})
    assert [p.tool for p in again.pending] == ["write"]  # revoked: write c waits again
    assert ran == ["a", "b", "pay 5"]
    with pytest.raises(DecisionError, match="no remembered decision for 'write'"):
        await agent.forget(first.run_id, "write")


async def test_always_deny_refuses_later_calls_with_the_same_reason() -> None:
    ran: list[str] = []
    asked: list[str] = []

    def approver(requests):
        asked.extend(r.tool for r in requests)
        return {
            r.call_id: Deny("never writes", remember=True) if r.tool == "write" else Approve()
            for r in requests
        }

    model = script()
    result = await Agent(model, make_tools(ran), approver=approver).run("go")
    assert result.status == "done"
    assert ran == ["pay 5"]
    assert asked == ["write", "pay"]  # write b and c were denied without asking
    assert "never writes" in model.requests[-1].messages[-1].content


async def test_decision_data_reaches_the_tool_and_never_the_model() -> None:
    got: list[object] = []

    @tool(needs_approval=True)
    def deploy(env: str, ctx: ToolContext[None]) -> str:
        """Deploy."""
        got.append((env, dict(ctx.decision_data)))
        return f"deployed {env}"

    model = ScriptedModel([call("deploy", {"env": "prod"}), call("deploy", {"env": "dev"}), "done"])
    token = "ticket-SECRET-42"
    answers = iter([Approve(data={"ticket": token}), Edit({"env": "qa"}, data={"ticket": "t2"})])

    def approver(requests):
        return {r.call_id: next(answers) for r in requests}

    await Agent(model, [deploy], approver=approver).run("go")
    assert got == [("prod", {"ticket": token}), ("qa", {"ticket": "t2"})]
    seen_by_model = "".join(str(m) for req in model.requests for m in req.messages)
    assert token not in seen_by_model
    assert "t2" not in seen_by_model
