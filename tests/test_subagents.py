"""Sub-agents as tools (`Agent.as_tool`): each call is a child run in the parent's store, with
its own id, tools and audit trail; its answer, its failure, its events and its usage reach
the parent, and a recorded tree replays. Decisions and gates: `test_subagent_decisions`;
aborts: `test_subagent_aborts`. The model's words are scripted; the runs, stores and
decisions are real."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.subagents import gated_writer_tools, priced, supervisor, writer_tools

from loopstate import (
    Agent,
    Approve,
    MemoryStore,
    Recorder,
    ReplayDivergence,
    ScriptedModel,
    SQLiteStore,
    replay,
    usage_tree,
)
from loopstate.engine.models.scripted import call


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
