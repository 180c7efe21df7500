"""Approval in one process: approve, deny, edit, abort, batches, policies."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from support import make_tools

from loopstate import (
    Abort,
    Agent,
    ApprovalRequest,
    Approve,
    Decision,
    DecisionError,
    Deny,
    Edit,
    MemoryStore,
    ScriptedModel,
)
from loopstate.engine.models.scripted import call, calls


def approver_returning(**by_tool: Decision):
    seen: list[list[ApprovalRequest]] = []

    async def approver(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        seen.append(requests)
        return {r.call_id: by_tool[r.tool] for r in requests if r.tool in by_tool}

    return approver, seen


def tool_messages(result) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}


async def test_an_approved_call_runs_once_and_the_model_sees_its_result() -> None:
    counted, tools = make_tools()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "xy"}), "done"])
    approver, seen = approver_returning(write_file=Approve())
    result = await Agent(model, tools, approver=approver).run("go")
    assert (result.status, result.output, result.stop_reason) == ("done", "done", "answer")
    assert counted["write_file"] == 1
    assert [[r.tool for r in batch] for batch in seen] == [["write_file"]]
    assert model.requests[1].messages[-1].content == "wrote 2 bytes to a"


async def test_a_denied_call_does_not_run_and_the_model_gets_the_reason() -> None:
    counted, tools = make_tools()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "x"}), "ok, I won't"])
    approver, _ = approver_returning(write_file=Deny("not on Fridays"))
    result = await Agent(model, tools, approver=approver).run("go")
    assert result.status == "done"
    assert counted["write_file"] == 0
    seen_by_model = model.requests[1].messages[-1]
    assert seen_by_model.role == "tool"
    assert "denied" in seen_by_model.content.lower()
    assert "not on Fridays" in seen_by_model.content


async def test_an_edited_call_runs_with_the_new_arguments_and_the_model_is_told() -> None:
    counted, tools = make_tools()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "x"}), "fine"])
    approver, _ = approver_returning(write_file=Edit({"path": "b", "content": "hello"}))
    result = await Agent(model, tools, approver=approver).run("go")
    assert counted["write_file"] == 1
    told = model.requests[1].messages[-1].content
    assert "wrote 5 bytes to b" in told
    assert json.dumps({"content": "hello", "path": "b"}, sort_keys=True) in told
    # the audit keeps both argument sets
    assert result.status == "done"


async def test_an_invalid_edit_is_refused_with_a_clear_error_and_nothing_runs() -> None:
    counted, tools = make_tools()
    store = MemoryStore()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "x"}), "fine"])
    approver, _ = approver_returning(write_file=Edit({"path": "b"}))
    agent = Agent(model, tools, approver=approver, store=store, ids=lambda: "r1")
    with pytest.raises(DecisionError, match=r"edit for call .* refused: content: Field required"):
        await agent.run("go")
    assert counted["write_file"] == 0
    stored = await store.load("r1")
    assert stored.state == "awaiting_approval"
    assert [p.tool for p in stored.pending] == ["write_file"]


async def test_abort_ends_the_run_with_no_further_model_call_or_tool() -> None:
    counted, tools = make_tools()
    model = ScriptedModel(
        [calls(call("read_file", {"path": "a"}), call("write_file", {"path": "a", "content": "x"}))]
    )
    approver, _ = approver_returning(write_file=Abort("stop everything"))
    result = await Agent(model, tools, approver=approver).run("go")
    assert result.status == "aborted"
    assert result.stop_reason == "aborted: stop everything"
    assert len(model.requests) == 1
    assert sum(counted.values()) == 0
    assert result.transitions[-1].target == "aborted"


async def test_parallel_calls_run_once_and_all_gated_calls_reach_the_approver_in_one_batch() -> (
    None
):
    counted, tools = make_tools()
    batch = calls(
        call("read_file", {"path": "r"}),
        call("write_file", {"path": "w1", "content": "1"}),
        call("pay", {"amount": 5}),
        call("write_file", {"path": "w2", "content": "22"}),
        call("pay", {"amount": 500}),
    )
    model = ScriptedModel([batch, "done"])
    seen: list[list[str]] = []

    async def approver(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        seen.append([r.call_id for r in requests])
        return {
            "call_1_2": Approve(),
            "call_1_4": Deny("no"),
            "call_1_5": Edit({"amount": 99}),
        }

    result = await Agent(model, tools, approver=approver).run("go")
    assert seen == [["call_1_2", "call_1_4", "call_1_5"]]
    assert counted == {"read_file": 1, "write_file": 1, "pay": 2}
    results = tool_messages(result)
    assert list(results) == ["call_1_1", "call_1_2", "call_1_3", "call_1_4", "call_1_5"]
    assert results["call_1_2"] == "wrote 1 bytes to w1"
    assert "Denied" in results["call_1_4"]
    assert "paid 99" in results["call_1_5"]
    assert results["call_1_3"].startswith("paid 5 (key ")


async def test_a_predicate_gates_only_the_calls_it_selects() -> None:
    counted, tools = make_tools()
    model = ScriptedModel([call("pay", {"amount": 99}), call("pay", {"amount": 100}), "done"])
    result = await Agent(model, tools, store=MemoryStore()).run("go")
    assert result.status == "awaiting_approval"
    assert [(p.tool, p.arguments) for p in result.pending] == [("pay", {"amount": 100})]
    assert counted["pay"] == 1


async def test_auto_approve_runs_gated_calls_without_asking() -> None:
    counted, tools = make_tools()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "x"}), "done"])
    result = await Agent(model, tools, auto_approve=True).run("go")
    assert result.status == "done"
    assert counted["write_file"] == 1
    approvals = [e for e in result.events if e.kind == "tool_approval"]
    assert [(e.outcome, e.actor) for e in approvals] == [("auto", "auto_approve")]


async def test_an_approver_that_leaves_a_call_out_suspends_the_run_with_it_pending() -> None:
    counted, tools = make_tools()
    model = ScriptedModel(
        [
            calls(call("write_file", {"path": "a", "content": "1"}), call("pay", {"amount": 700})),
            "ok",
        ]
    )
    approver, _ = approver_returning(write_file=Approve())
    agent = Agent(model, tools, approver=approver)
    result = await agent.run("go")
    assert result.status == "awaiting_approval"
    assert [p.tool for p in result.pending] == ["pay"]
    assert sum(counted.values()) == 0  # nothing in the batch runs until all is decided
    resumed = await agent.resume(result.run_id, {result.pending[0].call_id: Approve()})
    assert resumed.status == "done"
    assert counted == {"write_file": 1, "pay": 1}


async def test_resume_refuses_unknown_calls_stale_digests_and_second_decisions() -> None:
    counted, tools = make_tools()
    store = MemoryStore()
    model = ScriptedModel([call("write_file", {"path": "a", "content": "1"}), "ok"])
    agent = Agent(model, tools, store=store)
    suspended = await agent.run("go")
    pending = suspended.pending[0]
    before = await store.load(suspended.run_id)
    with pytest.raises(DecisionError, match="no call nope"):
        await agent.resume(suspended.run_id, {"nope": Approve()})
    with pytest.raises(DecisionError, match="other arguments"):
        await agent.resume(suspended.run_id, {pending.call_id: Approve(digest="0" * 16)})
    assert await store.load(suspended.run_id) == before
    done = await agent.resume(suspended.run_id, {pending.call_id: Approve(digest=pending.digest)})
    assert done.status == "done"
    assert counted["write_file"] == 1
    with pytest.raises(Exception, match="has ended"):
        await agent.resume(suspended.run_id, {pending.call_id: Approve()})


async def test_every_decision_emits_a_tool_approval_event_with_its_outcome() -> None:
    _, tools = make_tools()
    model = ScriptedModel(
        [
            calls(call("write_file", {"path": "a", "content": "1"}), call("pay", {"amount": 700})),
            "ok",
        ]
    )
    approver, _ = approver_returning(write_file=Deny("no"), pay=Edit({"amount": 1}))
    result = await Agent(model, tools, approver=approver).run("go")
    approvals = [
        (e.tool, e.outcome, e.actor, e.reason) for e in result.events if e.kind == "tool_approval"
    ]
    assert approvals == [
        ("write_file", "deny", "approver", "no"),
        ("pay", "edit", "approver", "pay needs approval"),
    ]


def test_clone_keeps_the_configuration_but_for_the_changes() -> None:
    from loopstate import DefinitionError

    _, tools = make_tools()
    agent = Agent(ScriptedModel([]), tools, instructions="be kind", max_steps=3)
    other_store = MemoryStore()
    copy = agent.clone(store=other_store)
    assert copy.store is other_store
    assert copy.model is agent.model
    assert copy.instructions == "be kind"
    assert [t.name for t in copy.tools] == [t.name for t in agent.tools]
    with pytest.raises(DefinitionError, match="no options"):
        agent.clone(colour="red")


async def test_the_calls_of_one_batch_run_concurrently_and_keep_the_models_order() -> None:
    import asyncio

    from loopstate import tool

    started: set[str] = set()
    everyone_started, finished = asyncio.Event(), {n: asyncio.Event() for n in ("fast", "mid")}
    after = {"slow": "mid", "mid": "fast"}  # the order they finish in: fast, mid, slow

    @tool
    async def nap(name: str) -> str:
        """Waits for the others."""
        started.add(name)
        if len(started) == 3:
            everyone_started.set()
        # Run one after another, the first call would wait here for calls never started.
        await asyncio.wait_for(everyone_started.wait(), 30)
        if name in after:
            await finished[after[name]].wait()
        if name in finished:
            finished[name].set()
        return name

    batch = calls(*(call("nap", {"name": n}) for n in ("slow", "fast", "mid")))
    result = await Agent(ScriptedModel([batch, "done"]), [nap], store=MemoryStore()).run("go")
    assert result.status == "done"
    assert [m.content for m in result.messages if m.role == "tool"] == ["slow", "fast", "mid"]
