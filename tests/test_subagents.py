"""Sub-agents as tools (`Agent.as_tool`): each call is a child run in the parent's store, with
its own id, tools and audit trail; its answer, its failure, its waiting and its usage reach
the parent. The model's words are scripted; the runs, stores and decisions are real."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.waiting import until

from loopstate import (
    Abort,
    Agent,
    Approve,
    DecisionError,
    Deny,
    MemoryStore,
    Recorder,
    ReplayDivergence,
    RunNotResumable,
    ScriptedModel,
    SQLiteStore,
    Usage,
    pending_tree,
    replay,
    tool,
    usage_tree,
)
from loopstate.engine.messages import ToolCall, ToolMessage
from loopstate.engine.models.scripted import Turn, call, calls, text
from loopstate.engine.operations import abort_run, queue_decision


def writer_tools(written: list[str]):
    @tool
    def draft(topic: str) -> str:
        """Draft a paragraph on a topic."""
        written.append(topic)
        return f"a paragraph on {topic}"

    return [draft]


def used(tokens: int) -> Usage:
    return Usage(prompt_tokens=tokens, completion_tokens=1)


def priced(item: ToolCall | str, tokens: int) -> Turn:
    turn = text(item) if isinstance(item, str) else calls(item)
    return Turn(turn.reply, turn.expect, used(tokens))


def supervisor(store, child_model, parent_model, *, direct_return=False, written=None, **kw):
    writer = Agent(child_model, writer_tools(written if written is not None else []), store=store)
    delegate = writer.as_tool(
        name="writer", description="Writes paragraphs.", direct_return=direct_return
    )
    return Agent(parent_model, [delegate], store=store, **kw), writer


async def test_a_sub_agent_runs_as_its_own_child_run_and_its_answer_is_the_calls_result() -> None:
    store, written = MemoryStore(), []
    child_model = ScriptedModel([call("draft", {"topic": "owls"}), "Owls hunt at night."])
    parent_model = ScriptedModel([call("writer", {"task": "write about owls"}), "Sent."])
    parent, _ = supervisor(store, child_model, parent_model, written=written)
    result = await parent.run("tell me about owls")
    assert (result.status, result.output, written) == ("done", "Sent.", ["owls"])
    (record,) = (await store.load(result.run_id)).calls
    assert record.child_run_id is not None
    assert record.status == "succeeded"
    child = await store.load(record.child_run_id)
    assert child.parent is not None
    assert (child.parent.run_id, child.parent.call_id, child.parent.name) == (
        result.run_id,
        record.call_id,
        "writer",
    )
    assert child.messages[0].content == "write about owls"
    assert [c.tool for c in child.calls] == ["draft"]  # its own tools only
    assert parent_model.requests[1].messages[-1].content == "Owls hunt at night."


async def test_direct_return_ends_the_parent_with_the_childs_output_and_no_model_call() -> None:
    store = MemoryStore()
    child_model = ScriptedModel(["The final answer."])
    parent_model = ScriptedModel([call("writer", {"task": "answer"})])
    parent, _ = supervisor(store, child_model, parent_model, direct_return=True)
    result = await parent.run("go")
    assert (result.status, result.output, result.stop_reason) == (
        "done",
        "The final answer.",
        "direct_return",
    )
    assert len(parent_model.requests) == 1  # no synthesis by the parent


async def test_a_failed_child_is_a_failed_tool_result_never_an_empty_success() -> None:
    store = MemoryStore()
    child_model = ScriptedModel([])  # no turn left: the child's model call fails
    parent_model = ScriptedModel([call("writer", {"task": "x"}), "The writer failed."])
    parent, _ = supervisor(store, child_model, parent_model)
    result = await parent.run("go")
    assert result.status == "done"
    (record,) = (await store.load(result.run_id)).calls
    assert record.status == "failed"
    told = parent_model.requests[1].messages[-1].content
    assert told.startswith("Error: sub-agent writer (run sub_")
    assert "failed: " in told
    assert (await store.load(record.child_run_id or "")).status == "failed"


async def test_usage_rolls_up_own_total_and_per_agent(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    child_model = ScriptedModel([priced(call("draft", {"topic": "a"}), 10), priced("done", 20)])
    parent_model = ScriptedModel([priced(call("writer", {"task": "t"}), 100), priced("ok", 200)])
    parent, _ = supervisor(store, child_model, parent_model)
    result = await parent.run("go")
    report = await usage_tree(store, result.run_id)
    assert report.own.prompt_tokens == 300
    assert report.total.prompt_tokens == 330
    assert {k: v.prompt_tokens for k, v in report.by_agent.items()} == {"main": 300, "writer": 30}
    assert await parent.usage(result.run_id) == report


def gated_writer_tools(written: list[str]):
    @tool(needs_approval=True)
    def publish(text: str) -> str:
        """Publish a text."""
        written.append(text)
        return "published"

    return [publish]


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


def money(sent: list[int]):
    @tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Transfer money."""
        sent.append(amount)
        return "sent"

    return transfer


def approve_everything(requests):
    return {r.call_id: Approve() for r in requests}


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


async def test_a_recorded_parent_replays_with_its_sub_agents_recorded_runs_and_no_model(
    tmp_path: Path,
) -> None:
    def team(child_model, parent_model, published: list[str], **kw):
        writer = Agent(child_model, gated_writer_tools(published), instructions="You write.")
        delegate = writer.as_tool(name="writer", description="w", direct_return=True)
        return Agent(parent_model, [delegate], store=MemoryStore(), **kw)

    def approver(requests):
        return {r.call_id: Approve() for r in requests}

    tape, published = tmp_path / "team.jsonl", []
    recording = team(
        ScriptedModel([call("publish", {"text": "hi"}), "Published hi."]),
        ScriptedModel([call("writer", {"task": "publish hi"})]),
        published,
        approver=approver,
        hooks=[Recorder(tape)],
    )
    recorded = await recording.run("go")
    assert (recorded.output, published) == ("Published hi.", ["hi"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team--call_1_1.jsonl", "team.jsonl"]

    silent = ScriptedModel([])  # any model call would raise: replay must not need one
    replayed = await replay(tape, team(silent, silent, published))
    assert (replayed.status, replayed.output, replayed.stop_reason) == (
        "done",
        "Published hi.",
        "direct_return",
    )
    assert published == ["hi"]  # the child's tool did not run again
    assert silent.requests == []


async def test_a_sub_agent_that_asks_otherwise_than_recorded_diverges_in_replay(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "team.jsonl"
    recording, _ = supervisor(
        MemoryStore(),
        ScriptedModel(["Owls."]),
        ScriptedModel([call("writer", {"task": "owls"}), "ok"]),
        hooks=[Recorder(tape)],
    )
    await recording.run("go")
    changed = Agent(ScriptedModel([]), writer_tools([]), instructions="Be terse.")
    parent = Agent(
        ScriptedModel([]), [changed.as_tool(name="writer", description="Writes paragraphs.")]
    )
    with pytest.raises(ReplayDivergence, match="differs"):
        await replay(tape, parent)


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


async def test_a_streamed_parent_shows_its_sub_agents_events_under_the_childs_run_id() -> None:
    store = MemoryStore()
    writer = Agent(ScriptedModel([call("draft", {"topic": "tides"}), "A paragraph."]),
                   writer_tools([]), store=store)  # fmt: skip
    parent = Agent(
        ScriptedModel([call("writer", {"task": "tides"}), "Done."]),
        [writer.as_tool(name="writer", description="w")],
        store=store,
    )
    stream = parent.stream("go")
    seen = [item async for item in stream]
    (delegating,) = stream.result.messages[1].calls
    child = (await store.load(stream.result.run_id)).calls[0].child_run_id
    by_run = {e.run_id for e in seen if hasattr(e, "run_id")}
    assert by_run == {stream.result.run_id, child}
    child_kinds = [e.kind for e in seen if getattr(e, "run_id", None) == child]
    assert child_kinds[0] == "run_started"
    assert child_kinds[-1] == "run_finished"
    assert "tool_finished" in child_kinds
    assert delegating.name == "writer"


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
