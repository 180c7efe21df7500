"""Flows stream as agents do: the coaching flow end to end over real HTTP/SSE (a model server on
127.0.0.1, litellm streaming), each step's events and deltas, a `phase_changed` event on every
phase the run enters, across waits for the user and for a person's approval."""

from __future__ import annotations

from typing import Any

import pytest
from flow_child import ANSWERS, PLAN, SCHEMA
from model_server import serve, text_reply, tool_call_reply

from loopstate import LiteLLMModel, MemoryStore, ScriptedModel
from loopstate.engine.run_stream import RunStream
from loopstate.engine.streaming import TextDelta, ToolCallDelta
from loopstate.machines.coaching import coaching_flow
from loopstate.machines.flows import FlowResult

QUESTION = "How old are you, how far do you run a week, how many days, and any injuries?"
COLLECTED = [
    (f"c{i}", "collect_data", {"field": field, "value": value})
    for i, (field, value) in enumerate(
        [("age", 43), ("weekly_volume", 70), ("injury_history", "a stress fracture"),
         ("training_days", 5)]
    )
]  # fmt: skip


async def drain(stream: RunStream[FlowResult]) -> tuple[list[Any], FlowResult]:
    items = [item async for item in stream]
    return items, stream.result


def moves(items: list[Any]) -> list[tuple[str | None, str]]:
    return [(e.source, e.target) for e in items if getattr(e, "kind", "") == "phase_changed"]


def said(items: list[Any]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextDelta))


async def test_the_coaching_flow_streams_end_to_end_over_http_with_its_phase_changes() -> None:
    replies = [
        tool_call_reply(("g1", "set_goal", {"goal": "run a 4:25 1500m"})),
        tool_call_reply(("a1", "submit_intake_schema", SCHEMA)),
        text_reply(QUESTION),
        tool_call_reply(*COLLECTED, text="Got it."),
        text_reply("Thanks, that is everything."),
        tool_call_reply(("p1", "generate_plan", PLAN)),
        text_reply("Here is your 8-week plan."),
        tool_call_reply(("r1", "respond_to_plan", {"decision": "accept"})),
    ]
    with serve(*replies) as server:
        model = LiteLLMModel("openai/gpt-4o-mini", api_base=server.openai_base, api_key="sk-t")
        flow = coaching_flow(models={p: model for p in ("default", "analyst", "plan")},
                             store=MemoryStore())  # fmt: skip

        items, first = await drain(flow.stream("I want to run a 4:25 1500m"))
        assert (first.status, first.phase) == ("awaiting_input", "intake")
        assert moves(items) == [(None, "goal_capture"), ("goal_capture", "analyst"),
                                ("analyst", "intake")]  # fmt: skip
        assert said(items) == QUESTION  # streamed in pieces, as the model sent them
        assert sum(isinstance(i, TextDelta) for i in items) > 3
        assert any(isinstance(i, ToolCallDelta) and i.tool == "submit_intake_schema"
                   for i in items)  # fmt: skip
        entered = next(e for e in items if getattr(e, "kind", "") == "phase_changed"
                       and e.target == "intake")  # fmt: skip
        assert entered.reason == "gate: schema_ready"

        items, second = await drain(flow.stream_resume(first.run_id, message=ANSWERS))
        assert (second.status, second.phase) == ("awaiting_approval", "plan")
        assert moves(items) == [("intake", "safety"), ("safety", "plan")]
        asked = [e for e in items if getattr(e, "kind", "") == "approval_requested"]
        assert [e.tool for e in asked] == ["generate_plan"]
        assert asked[0].reason.startswith("safety flags: stress_fracture_volume")

        call_id = second.pending[0].call_id
        items, third = await drain(flow.stream_resume(first.run_id, decisions={call_id: True}))
        assert (third.status, third.phase) == ("awaiting_input", "present")
        assert moves(items) == [("plan", "present")]
        assert said(items) == "Here is your 8-week plan."

        items, final = await drain(flow.stream_resume(first.run_id, message="Looks great!"))
        assert (final.status, final.phase) == ("done", "done")
        assert moves(items) == [("present", "done")]
        assert [getattr(e, "kind", "") for e in items][-1] == "run_finished"
        assert len(server.requests) == len(replies)
        assert all(r.body["stream"] is True for r in server.requests)
    assert final.data["plan"]["title"] == "Speed base"


async def test_a_flow_streamed_and_run_store_the_same_run() -> None:
    def flow() -> Any:
        model = ScriptedModel(["What is your goal?"])
        return coaching_flow(models={p: model for p in ("default", "analyst", "plan")},
                             store=MemoryStore(), ids=lambda: "r1", clock=lambda: 5.0)  # fmt: skip

    streamed, plain = flow(), flow()
    _, result = await drain(streamed.stream("hi"))
    ran = await plain.run("hi")
    assert (
        (result.status, result.output)
        == (ran.status, ran.output)
        == (
            "awaiting_input",
            "What is your goal?",
        )
    )
    assert await streamed.store.load("r1") == await plain.store.load("r1")
    kinds = [e.kind for e in ran.events]
    assert kinds[:2] == ["run_started", "phase_changed"]


def test_run_sync_runs_a_flow_from_code_that_is_not_async() -> None:
    model = ScriptedModel(["What is your goal?", "Which marathon?"])
    flow = coaching_flow(models={"default": model}, store=MemoryStore())
    result = flow.run_sync("hi")
    assert (result.status, result.phase) == ("awaiting_input", "goal_capture")
    later = flow.resume_sync(result.run_id, message="a marathon")
    assert (later.status, later.output) == ("awaiting_input", "Which marathon?")


async def test_run_sync_inside_a_running_loop_says_to_await_instead() -> None:
    flow = coaching_flow(models={"default": ScriptedModel([])}, store=MemoryStore())
    with pytest.raises(RuntimeError, match=r"flow\.run\(\.\.\.\)"):
        flow.run_sync("hi")
