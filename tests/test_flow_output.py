"""Structured outputs: re-asked with the validation error, then a clear failure."""

from __future__ import annotations

from flow_child import SCHEMA

from loopstate import MemoryStore, ScriptedModel
from loopstate.engine.models.scripted import call
from loopstate.machines.coaching import coaching_flow

DUPLICATE = SCHEMA | {"fields": [SCHEMA["fields"][0], SCHEMA["fields"][0]]}


async def test_an_invalid_output_is_sent_back_with_its_error_and_a_valid_one_is_kept() -> None:
    analyst = ScriptedModel(
        [call("submit_intake_schema", DUPLICATE), call("submit_intake_schema", SCHEMA)]
    )
    goal = ScriptedModel([call("set_goal", {"goal": "1500m"}), "How old are you?"])
    flow = coaching_flow(models={"default": goal, "analyst": analyst}, store=MemoryStore())
    result = await flow.run("I want to run a 4:25 1500m")
    assert (result.status, result.phase) == ("awaiting_input", "intake")
    retry = analyst.requests[1]
    assert retry.tool_choice == "required"
    assert "field names must be unique" in retry.messages[-1].content  # type: ignore[union-attr]
    assert [f["field_name"] for f in result.data["intake_schema"]["fields"]][:2] == [
        "age",
        "weekly_volume",
    ]


async def test_an_output_still_invalid_after_the_limit_fails_the_run_saying_why() -> None:
    analyst = ScriptedModel([call("submit_intake_schema", DUPLICATE)] * 3)
    goal = ScriptedModel([call("set_goal", {"goal": "1500m"})])
    flow = coaching_flow(models={"default": goal, "analyst": analyst}, store=MemoryStore())
    result = await flow.run("I want to run a 4:25 1500m")
    assert (result.status, result.phase) == ("failed", "failed")
    assert result.error is not None
    assert "phase 'analyst'" in result.error
    assert "without a valid IntakeSchema" in result.error
    assert "field names must be unique" in result.error
    assert analyst.remaining == 0
    last = result.transitions[-1]
    assert (last.source, last.target, last.event) == ("analyst", "failed", "fail")
    assert last.actor == "flow"


async def test_a_key_the_schema_does_not_know_is_refused_to_the_analyst_not_dropped() -> None:
    analyst = ScriptedModel(
        [
            call("submit_intake_schema", SCHEMA | {"notes": "x"}),
            call("submit_intake_schema", SCHEMA),
        ]
    )
    goal = ScriptedModel([call("set_goal", {"goal": "1500m"}), "How old are you?"])
    flow = coaching_flow(models={"default": goal, "analyst": analyst}, store=MemoryStore())
    result = await flow.run("I want to run a 4:25 1500m")
    assert (result.status, result.phase) == ("awaiting_input", "intake")
    told = analyst.requests[1].messages[-1].content
    assert "notes" in told  # type: ignore[operator]
    assert "Extra inputs are not permitted" in told  # type: ignore[operator]
