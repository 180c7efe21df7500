"""Sub-agents (see `test_subagents`) and aborts: a child run resumes only through its
parent, and an abort given anywhere in the tree (to a child's call, to the delegating
call, two levels down, or to a child run itself) aborts the whole tree up to the top."""

from __future__ import annotations

import pytest
from support.subagents import approve_everything, gated_writer_tools, money

from loopstate import Abort, Agent, MemoryStore, RunNotResumable, ScriptedModel
from loopstate.engine.models.scripted import call
from loopstate.engine.operations import abort_run


async def test_a_sub_agents_run_resumes_only_through_its_parent_and_aborts_with_it() -> None:
    store, published = MemoryStore(), []
    writer = Agent(
        ScriptedModel([call("publish", {"text": "hi"}), "x"]),
        gated_writer_tools(published),
        store=store,
        approver=approve_everything,
    )
    parent = Agent(
        ScriptedModel([call("writer", {"task": "t"}), "y"]),
        [writer.as_tool(name="writer", description="w")],
        store=store,
    )
    first = await parent.run("go")
    child_id = first.pending[0].run_id or ""
    with pytest.raises(RunNotResumable, match="is sub-agent 'writer' of run"):
        await writer.resume(child_id)  # its own approve-everything approver is no way around
    assert published == []
    ended = await parent.abort(first.run_id, "not now")
    assert ended.status == "aborted"
    assert (await store.load(child_id)).status == "aborted"
    assert await parent.pending(first.run_id) == []


@pytest.mark.parametrize("given_to", ["the sub-agent's call", "the delegating call"])
async def test_an_abort_given_anywhere_in_the_tree_aborts_the_whole_tree(given_to: str) -> None:
    # Abort stops the job: the parent must not go on as if its sub-agent had merely failed
    store, published = MemoryStore(), []
    writer = Agent(
        ScriptedModel([call("publish", {"text": "hi"}), "x"]),
        gated_writer_tools(published),
        store=store,
    )
    parent_model = ScriptedModel([call("writer", {"task": "t"}), "carried on regardless"])
    parent = Agent(parent_model, [writer.as_tool(name="writer", description="w")], store=store)
    first = await parent.run("go")
    (delegating,) = (await store.load(first.run_id)).calls
    target = first.pending[0].call_id if given_to == "the sub-agent's call" else delegating.call_id
    ended = await parent.resume(first.run_id, {target: Abort("wrong task")}, actor="ana")
    assert ended.status == "aborted"
    assert ended.stop_reason is not None
    assert "sub-agent writer" in ended.stop_reason
    assert "aborted: wrong task" in ended.stop_reason
    assert ended.transitions[-1].actor == "ana"
    assert len(parent_model.requests) == 1  # no model call after the abort
    assert (await store.load(delegating.child_run_id or "")).status == "aborted"
    assert (published, await parent.pending(first.run_id)) == ([], [])


async def test_an_abort_two_levels_down_aborts_every_run_up_to_the_top() -> None:
    sent: list[int] = []
    store = MemoryStore()
    payer = Agent(ScriptedModel([call("transfer", {"amount": 3}), "Paid."]), [money(sent)])
    manager_model = ScriptedModel([call("payer", {"task": "pay 3"}), "Payer done."])
    manager = Agent(manager_model, [payer.as_tool(name="payer", description="Pays.")])
    top_model = ScriptedModel([call("manager", {"task": "get 3 paid"}), "All paid."])
    top = Agent(top_model, [manager.as_tool(name="manager", description="M.")], store=store)
    first = await top.run("go")
    (pending,) = first.pending
    ended = await top.resume(first.run_id, {pending.call_id: Abort("no payments today")})
    assert ended.status == "aborted"
    tree = [await store.load(r) for r in (first.run_id, pending.run_id or "")]
    assert [s.status for s in tree] == ["aborted", "aborted"]
    middle = tree[1].parent
    assert middle is not None
    assert (await store.load(middle.run_id)).status == "aborted"
    assert (sent, len(manager_model.requests), len(top_model.requests)) == ([], 1, 1)


async def test_aborting_a_sub_agents_run_itself_aborts_its_tree_from_the_top() -> None:
    # `loopstate abort <child run>`: the top must not sit waiting for a child that has ended
    store = MemoryStore()
    payer = Agent(ScriptedModel([call("transfer", {"amount": 3}), "Paid."]), [money([])])
    manager = Agent(
        ScriptedModel([call("payer", {"task": "pay 3"}), "x"]),
        [payer.as_tool(name="payer", description="Pays.")],
    )
    top = Agent(
        ScriptedModel([call("manager", {"task": "get 3 paid"}), "y"]),
        [manager.as_tool(name="manager", description="M.")],
        store=store,
    )
    first = await top.run("go")
    grandchild = await store.load(first.pending[0].run_id or "")
    assert grandchild.parent is not None
    middle = grandchild.parent.run_id
    ended = await abort_run(store, middle, "over budget", actor="bob")
    assert ended.status == "aborted"
    runs = [await store.load(r) for r in (first.run_id, middle, grandchild.run_id)]
    assert [r.status for r in runs] == ["aborted"] * 3
    why = f"sub-agent manager (run {middle}) was aborted: over budget"
    assert runs[0].stop_reason == f"aborted: {why}"
    assert {r.transitions[-1].actor for r in runs} == {"bob"}
    assert await top.pending(first.run_id) == []
