"""Sub-agents (see `test_subagents`) and decisions: a child's undecided call suspends the
child and its parent, and a decision given to the parent routes down to it; a gated tool
stays gated by the top-level approver however many delegations down it is called; a
worker continues the tree once a child's last call is decided."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.subagents import approve_everything, gated_writer_tools, money
from support.waiting import until

from loopstate import (
    Agent,
    Approve,
    DecisionError,
    Deny,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    pending_tree,
    tool,
)
from loopstate.engine.messages import ToolMessage
from loopstate.engine.models.scripted import call
from loopstate.engine.operations import queue_decision


async def test_an_undecided_child_call_suspends_child_and_parent_and_a_decision_routes_down() -> (
    None
):
    store, written = MemoryStore(), []
    writer = Agent(
        ScriptedModel([call("publish", {"text": "hi"}), "Published."]),
        gated_writer_tools(written),
        store=store,
    )
    parent_model = ScriptedModel([call("writer", {"task": "publish hi"}), "All done."])
    parent = Agent(parent_model, [writer.as_tool(name="writer", description="w")], store=store)
    first = await parent.run("go")
    assert first.status == "awaiting_approval"
    (pending,) = first.pending
    (record,) = (await store.load(first.run_id)).calls
    assert (pending.tool, pending.run_id) == ("publish", record.child_run_id)
    assert [p.call_id for p in await pending_tree(store, first.run_id)] == [pending.call_id]
    assert (await store.load(record.child_run_id or "")).status == "awaiting_approval"
    assert written == []
    done = await parent.resume(first.run_id, {pending.call_id: Approve()})
    assert (done.status, done.output, written) == ("done", "All done.", ["hi"])
    assert parent_model.requests[1].messages[-1].content == "Published."


async def test_a_decision_for_an_unknown_call_of_the_tree_changes_nothing() -> None:
    store = MemoryStore()
    writer = Agent(
        ScriptedModel([call("publish", {"text": "hi"}), "x"]), gated_writer_tools([]), store=store
    )
    parent = Agent(
        ScriptedModel([call("writer", {"task": "t"}), "y"]),
        [writer.as_tool(name="writer", description="w")],
        store=store,
    )
    first = await parent.run("go")
    with pytest.raises(DecisionError):
        await parent.resume(first.run_id, {"nope": Approve()})
    again = await parent.resume(first.run_id)
    assert again.status == "awaiting_approval"


@pytest.mark.parametrize("disguise", ["same name, no gate", "other name, same function"])
async def test_delegating_cannot_get_a_gated_call_past_the_top_level_approver(
    disguise: str,
) -> None:
    sent: list[int] = []
    transfer = money(sent)
    name = "transfer" if disguise.startswith("same") else "tip_jar"
    ungated = tool(name=name)(transfer.fn)  # the parent's gated function, handed down ungated
    helper = Agent(
        ScriptedModel([call(name, {"amount": 500}), "Paid."]),
        [ungated],
        approver=approve_everything,  # the child's own approver approves anything
        auto_approve=True,  # and it would auto-approve every gated call
    )
    store, asked = MemoryStore(), []

    def top(requests):  # the person at the top decides nothing yet
        asked.extend((r.tool, r.arguments["amount"]) for r in requests)
        return {}

    parent = Agent(
        ScriptedModel([call("helper", {"task": "pay 500"}), "ok"]),
        [transfer, helper.as_tool(name="helper", description="Pays things.")],
        approver=top,
        store=store,
    )
    first = await parent.run("go")
    assert first.status == "awaiting_approval"
    assert [(p.tool, p.arguments["amount"]) for p in first.pending] == [(name, 500)]
    assert (asked, sent) == ([(name, 500)], [])
    denied = await parent.resume(first.run_id, {first.pending[0].call_id: Deny("no")})
    assert (denied.status, sent) == ("done", [])


async def test_a_child_that_shares_the_parents_gated_tool_waits_for_the_parents_approver() -> None:
    sent: list[int] = []
    transfer = money(sent)
    helper = Agent(
        ScriptedModel([call("transfer", {"amount": 7}), "Paid."]),
        [transfer],
        approver=approve_everything,
    )
    decided: list[str] = []

    def top(requests):
        decided.extend(r.tool for r in requests)
        return {r.call_id: Deny("not today") for r in requests}

    parent = Agent(
        ScriptedModel([call("helper", {"task": "pay 7"}), "ok"]),
        [helper.as_tool(name="helper", description="Pays things.")],
        approver=top,
        store=MemoryStore(),
    )
    result = await parent.run("go")
    assert (result.status, decided, sent) == ("done", ["transfer"], [])


async def test_a_gate_holds_two_delegations_down_and_the_grandchild_waits_for_the_top() -> None:
    sent: list[int] = []
    transfer = money(sent)
    store = MemoryStore()
    payer = Agent(
        ScriptedModel([call("transfer", {"amount": 3}), "Paid."]),
        [tool(name="transfer")(transfer.fn)],  # ungated, two levels below the gate
        auto_approve=True,
    )
    manager = Agent(
        ScriptedModel([call("payer", {"task": "pay 3"}), "Payer done."]),
        [payer.as_tool(name="payer", description="Pays.")],
    )
    top = Agent(
        ScriptedModel([call("manager", {"task": "get 3 paid"}), "All paid."]),
        [transfer, manager.as_tool(name="manager", description="Manages.")],
        store=store,
    )
    first = await top.run("go")
    (pending,) = first.pending
    assert (pending.tool, sent) == ("transfer", [])
    grandchild = await store.load(pending.run_id or "")
    assert grandchild.parent is not None
    assert grandchild.parent.name == "payer"
    done = await top.resume(first.run_id, {pending.call_id: Approve()})
    assert (done.status, done.output, sent) == ("done", "All paid.", [3])
    assert sorted((await top.usage(done.run_id)).by_agent) == ["main", "manager", "payer"]


async def test_the_parents_hooks_hear_a_sub_agents_approvals_but_cannot_change_its_results() -> (
    None
):
    from loopstate import ApprovalRequest, Hooks
    from loopstate.engine.state import CallRecord

    class Notifier(Hooks):
        def __init__(self) -> None:
            self.asked: list[ApprovalRequest] = []

        async def on_approval_requested(self, requests) -> None:  # type: ignore[no-untyped-def]
            self.asked.extend(requests)

        async def after_tool(self, call: CallRecord, result: str) -> str | None:
            return "rewritten by the parent's hook"

    store, published, notifier = MemoryStore(), [], Notifier()
    writer = Agent(ScriptedModel([call("publish", {"text": "hi"}), "x"]),
                   gated_writer_tools(published), store=store)  # fmt: skip
    parent = Agent(
        ScriptedModel([call("writer", {"task": "t"}), "y"]),
        [writer.as_tool(name="writer", description="w")],
        store=store,
        hooks=[notifier],
    )
    first = await parent.run("go")
    (pending,) = first.pending
    assert [(r.call_id, r.tool, r.run_id) for r in notifier.asked] == [
        (pending.call_id, "publish", pending.run_id)
    ]
    await parent.resume(first.run_id, {pending.call_id: Approve()})
    child = await store.load(pending.run_id or "")
    told = [m.content for m in child.messages if isinstance(m, ToolMessage)]
    assert told == ["published"]  # the child's own result, not the parent hook's


async def test_a_worker_continues_the_tree_once_a_childs_last_call_is_decided(
    tmp_path: Path,
) -> None:
    from loopstate.worker import Worker

    @tool(needs_approval=True)
    def publish(text: str) -> str:
        """Publish a text."""
        return f"published {text}"

    store = SQLiteStore(tmp_path / "runs.db")
    writer = Agent(ScriptedModel([call("publish", {"text": "hi"}), "Published."]), [publish],
                   store=store)  # fmt: skip
    boss = Agent(
        ScriptedModel([call("writer", {"task": "publish hi"}), "The writer published it."]),
        [writer.as_tool(name="writer", description="Publishes.")],
        store=store,
    )
    first = await boss.run("go")
    [pending] = first.pending
    assert await store.claim(owner="w", now=1e12, ttl=30, limit=10) == []  # nothing decided
    await queue_decision(store, first.run_id, pending.call_id, Approve(), actor="alice")
    stop = asyncio.Event()
    worker = Worker(boss, poll_s=0.01)
    serving = asyncio.create_task(worker.serve(stop))
    try:

        async def finished() -> bool:
            return (await store.load(first.run_id)).status == "done"

        await until(finished)
    finally:
        stop.set()
        await serving
    done = await store.load(first.run_id)
    assert (done.status, done.output, done.child_ready) == (
        "done",
        "The writer published it.",
        False,
    )
    child = await store.load(pending.run_id or "")
    assert child.status == "done"
    assert child.calls[0].decided_by == "alice"
