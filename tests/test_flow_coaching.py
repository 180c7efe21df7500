"""The coaching flow end to end with scripted models, in one process."""

from __future__ import annotations

from typing import Any

import pytest
from flow_child import ANSWERS, PLAN, SCHEMA, answers, happy_script

from loopstate import Approve, DefinitionError, MemoryStore, ScriptedModel
from loopstate.engine.models.scripted import call, calls, text
from loopstate.machines.coaching import DEFAULT_RULES, SafetyRule, coaching_flow, safety_check
from loopstate.machines.flows import Flow, FlowResult


def flow_with(script: list[Any], **options: Any) -> tuple[Flow, ScriptedModel]:
    model = ScriptedModel(script)
    models = {p: model for p in ("default", "analyst", "plan")}
    return coaching_flow(models=models, store=MemoryStore(), **options), model


def phases(result: FlowResult) -> list[tuple[str, str, str, str | None]]:
    """The phase transitions of the audit trail: (source, target, event, actor)."""
    events = {"advance", "user_replied", "fail", "abort"}
    return [(t.source, t.target, t.event, t.actor) for t in result.transitions if t.event in events]


async def approve_all(requests: list[Any]) -> dict[str, Any]:
    return {r.call_id: Approve() for r in requests}


async def test_the_happy_path_waits_for_the_user_and_for_approval_and_ends_done() -> None:
    flow, _ = flow_with(happy_script())
    first = await flow.run("I want to run a 4:25 1500m")
    assert (first.status, first.phase) == ("awaiting_input", "intake")
    assert first.output == (
        "How old are you, how far do you run a week, how many days, and any injuries?"
    )
    second = await flow.resume(
        first.run_id, message="43, 70 km a week, 5 days, a stress fracture last year"
    )
    assert (second.status, second.phase) == ("awaiting_approval", "plan")
    assert [p.tool for p in second.pending] == ["generate_plan"]
    third = await flow.resume(first.run_id, decisions={second.pending[0].call_id: Approve()})
    assert (third.status, third.phase, third.output) == (
        "awaiting_input",
        "present",
        "Here is your 8-week plan.",
    )
    final = await flow.resume(first.run_id, message="Looks great!")
    assert (final.status, final.phase) == ("done", "done")
    assert final.data["answers"] == {
        "age": 43,
        "weekly_volume": 70.0,
        "injury_history": "stress fracture last year",
        "training_days": 5,
    }
    assert final.data["plan"]["title"] == "Speed base"
    assert final.data["safety"]["status"] == "approved_with_warnings"
    assert phases(final) == [
        ("goal_capture", "analyst", "advance", "flow"),
        ("analyst", "intake", "advance", "flow"),
        ("intake", "intake", "user_replied", "user"),
        ("intake", "safety", "advance", "flow"),
        ("safety", "plan", "advance", "flow"),
        ("plan", "present", "advance", "flow"),
        ("present", "present", "user_replied", "user"),
        ("present", "done", "advance", "flow"),
    ]
    gate = next(t for t in final.transitions if t.target == "safety")
    assert gate.reason == "gate: intake_complete"


async def test_each_phase_calls_the_model_routed_to_it() -> None:
    goal = ScriptedModel([call("set_goal", {"goal": "5k"})], name="fast")
    analyst = ScriptedModel([call("submit_intake_schema", SCHEMA)], name="reasoning")
    intake = ScriptedModel([text("How old are you?")], name="intake")
    flow = coaching_flow(
        models={"default": goal, "analyst": analyst, "intake": intake}, store=MemoryStore()
    )
    result = await flow.run("I want to run a fast 5k")
    assert (result.status, result.phase) == ("awaiting_input", "intake")
    used = [e.model for e in result.events if e.kind == "model_request"]
    assert used == ["fast", "reasoning", "intake"]
    # Each model saw its own phase's instructions, and only those.
    system = [m for m in analyst.requests[0].messages if m.role == "system"]
    assert len(system) == 1
    assert "The user's goal: 5k." in system[0].content


async def test_a_model_claiming_intake_is_done_with_a_required_field_missing_cannot_pass() -> None:
    script = [
        call("set_goal", {"goal": "1500m"}),
        call("submit_intake_schema", SCHEMA),
        text("How old are you, and any injuries?"),
        calls(
            call("collect_data", {"field": "age", "value": 7}),
            call("collect_data", {"field": "injury_history", "value": "none"}),
        ),
        text("Perfect, I have everything; building your plan now!"),
    ]
    flow, model = flow_with(script)
    first = await flow.run("I want to run a 4:25 1500m")
    result = await flow.resume(first.run_id, message="I'm 7, no injuries")
    assert (result.status, result.phase) == ("awaiting_input", "intake")
    assert result.data["answers"] == {"injury_history": "none"}  # age 7 was refused
    refused = [m.content for m in result.messages if m.role == "tool" and "age" in m.content]
    assert "age must be at least 13" in refused[0]
    assert not any(t.target == "safety" for t in result.transitions)
    assert model.remaining == 0


async def test_a_safety_block_returns_to_intake_with_the_blocking_answer_cleared() -> None:
    script = [
        *happy_script()[:3],
        answers(injuries="chest pain on hills"),
        text("Thanks."),
        text("Before a plan, please see a doctor about the chest pain."),  # intake again
        call("collect_data", {"field": "injury_history", "value": "cleared by my doctor"}),
        text("Great, thanks."),
        call("generate_plan", PLAN),
        text("Here is your plan."),
    ]
    flow, model = flow_with(script, approver=approve_all)
    first = await flow.run("I want to run a 4:25 1500m")
    blocked = await flow.resume(first.run_id, message="43, 70 km, 5 days, chest pain on hills")
    assert (blocked.status, blocked.phase) == ("awaiting_input", "intake")
    assert blocked.data["safety"]["status"] == "blocked"
    assert "injury_history" not in blocked.data["answers"]
    assert "chest pain" in blocked.output.lower()  # type: ignore[union-attr]
    told = model.requests[-1].messages[0]
    assert told.role == "system"
    assert "Before a plan, this needs care: Chest pain" in told.content
    assert ("safety", "intake", "advance", "flow") in phases(blocked)
    cleared = await flow.resume(first.run_id, message="My doctor cleared me.")
    assert cleared.data["safety"]["status"] == "approved"
    assert (cleared.status, cleared.phase) == ("awaiting_input", "present")


async def test_a_goal_change_starts_over_and_keeps_the_answers_the_new_form_asks_for() -> None:
    script = [
        *happy_script()[:7],
        call("respond_to_plan", {"decision": "change_goal", "notes": "a marathon"}),
        call("set_goal", {"goal": "a marathon"}),
        call("submit_intake_schema", SCHEMA),
        text("I already have what I need."),
        call("generate_plan", PLAN | {"title": "Marathon base"}),
        text("Here is your marathon plan."),
    ]
    flow, _ = flow_with(script, approver=approve_all)
    run = await flow.run("I want to run a 4:25 1500m")
    await flow.resume(run.run_id, message="43, 70 km, 5 days, a stress fracture last year")
    result = await flow.resume(run.run_id, message="Actually, I want to run a marathon")
    assert (result.status, result.phase) == ("awaiting_input", "present")
    assert result.data["goal"] == "a marathon"
    assert result.data["plan"]["title"] == "Marathon base"
    assert ("present", "goal_capture", "advance", "flow") in phases(result)


async def test_a_refinement_goes_back_to_plan_with_the_users_notes() -> None:
    script = [
        *happy_script()[:7],
        call("respond_to_plan", {"decision": "refine", "notes": "only 3 days a week"}),
        call("generate_plan", PLAN | {"title": "Three days"}),
        text("Here is the 3-day version."),
        call("respond_to_plan", {"decision": "accept"}),
    ]
    flow, model = flow_with(script, approver=approve_all)
    run = await flow.run("I want to run a 4:25 1500m")
    await flow.resume(run.run_id, message="43, 70 km, 5 days, a stress fracture last year")
    refined = await flow.resume(run.run_id, message="Can we do 3 days?")
    assert refined.data["plan"]["title"] == "Three days"
    told = model.requests[8].messages[0].content
    assert "Revise the previous plan: only 3 days a week" in told  # type: ignore[operator]
    final = await flow.resume(run.run_id, message="Perfect")
    assert final.status == "done"
    assert [t for _, t, e, _ in phases(final) if e == "advance"].count("plan") == 2


async def test_a_message_queued_for_a_flow_waiting_for_the_user_is_taken_by_resume() -> None:
    from loopstate.engine.operations import queue_message
    from loopstate.engine.store import ready

    flow, _ = flow_with(happy_script())
    first = await flow.run("I want to run a 4:25 1500m")
    assert first.status == "awaiting_input"
    await queue_message(
        flow.store, first.run_id, "43, 70 km a week, 5 days, a stress fracture last year"
    )
    assert ready(await flow.store.load(first.run_id))
    second = await flow.resume(first.run_id)
    assert (second.status, second.phase) == ("awaiting_approval", "plan")
    assert (await flow.store.load(first.run_id)).queued_message is None


async def test_a_seed_named_intake_is_flagged_and_its_plan_waits_for_a_person() -> None:
    flow, model = flow_with(happy_script())
    first = await flow.run("I want to run a 4:25 1500m")
    second = await flow.resume(first.run_id, message=ANSWERS)
    safety = second.data["safety"]
    assert safety["flags"] == [
        {
            "rule": "stress_fracture_volume",
            "reason": "History of stress fractures with high volume - recommend medical clearance.",
        }
    ]
    assert safety["contraindications"] == [
        "No increase in weekly volume; reduce it given the stress fracture history."
    ]
    told = model.requests[-1].messages[0].content  # the plan's model
    assert "Contraindications: ['No increase in weekly volume" in told  # type: ignore[operator]
    assert "3. Avoids all contraindicated activities" in told  # type: ignore[operator]
    (request,) = second.pending
    assert request.tool == "generate_plan"
    assert request.reason == (
        "safety flags: stress_fracture_volume: History of stress fractures with high volume "
        "- recommend medical clearance."
    )
    assert second.data["confidence"] == dict.fromkeys(
        ["age", "weekly_volume", "injury_history", "training_days"], "explicit"
    )


async def test_an_unflagged_athletes_plan_is_not_held_for_approval() -> None:
    script = happy_script()
    script[3] = answers(volume=30, injuries="none")
    flow, _ = flow_with(script)  # no approver: a gated plan would suspend the run
    first = await flow.run("I want to run a 4:25 1500m")
    result = await flow.resume(first.run_id, message="43, 30 km, 5 days, no injuries")
    assert (result.status, result.phase) == ("awaiting_input", "present")
    assert result.data["safety"]["status"] == "approved"
    assert not any(e.kind == "approval_requested" for e in result.events)


async def test_the_analyst_reframes_the_goal_through_questions_once() -> None:
    reframe = {
        "internal_goal": "Build sustainable speed with longevity as the foundation",
        "questions": ["How do you recover after a hard week?", "How much do you sleep?"],
    }
    script = [
        call("set_goal", {"goal": "run a 4:25 1500m"}),
        call("submit_intake_schema", SCHEMA | {"reframe": reframe}),  # the analyst reframes
        text("Love it. How do you usually recover after a hard week, and how much do you sleep?"),
        call("set_goal", {"goal": "a 4:25 1500m, without getting hurt again"}),
        call("submit_intake_schema", SCHEMA | {"reframe": reframe}),  # reframed once already
        text("How old are you, how far do you run a week, how many days, and any injuries?"),
    ]
    flow, model = flow_with(script)
    first = await flow.run("I want to run a 4:25 1500m")
    assert (first.status, first.phase) == ("awaiting_input", "goal_capture")
    assert ("analyst", "goal_capture", "advance", "flow") in phases(first)
    reframed = next(t for t in first.transitions if t.target == "goal_capture")
    assert reframed.reason == "gate: reframe_goal"
    asked = model.requests[2].messages[0].content
    assert "How much do you sleep?" in asked  # type: ignore[operator]
    assert "never tell them their goal is wrong" in asked  # type: ignore[operator]
    assert first.data["reframe"]["stated_goal"] == "run a 4:25 1500m"
    assert len(model.requests) == 3  # the analyst runs again only once the user has answered
    assert "goal" not in first.data  # the user restates it after the questions
    second = await flow.resume(first.run_id, message="Badly, 6 hours. I'd rather not get hurt.")
    assert (second.status, second.phase) == ("awaiting_input", "intake")
    assert second.data["goal"] == "a 4:25 1500m, without getting hurt again"
    assert [t for _, t, e, _ in phases(second) if e == "advance"].count("goal_capture") == 1
    told = model.requests[4].messages[0].content  # the analyst, the second time
    assert "Do not reframe it again" in told  # type: ignore[operator]


def test_a_safety_rule_over_a_field_the_intake_lacks_is_refused_when_the_flow_is_built() -> None:
    typo = SafetyRule(
        "stress_fracture_volume",
        ("injury_history", "weekly_km"),
        lambda p: True,
        "High volume after a stress fracture.",
        "flag_for_review",
    )
    with pytest.raises(DefinitionError) as refused:
        coaching_flow(rules=[*DEFAULT_RULES[:2], typo], store=MemoryStore())
    assert str(refused.value).startswith(
        "safety rule 'stress_fracture_volume' reads 'weekly_km': IntakeData has no field "
        "'weekly_km' (its fields: age, sex,"
    )


async def test_an_answer_to_a_field_the_intake_lacks_goes_back_to_the_model_to_correct() -> None:
    script = [
        *happy_script()[:3],
        calls(
            call("collect_data", {"field": "weekly_km", "value": 70}),  # not a field
            call("collect_data", {"field": "age", "value": "forty-three"}),  # not a number
        ),
        text("Sorry, let me note that properly."),
    ]
    flow, _ = flow_with(script)
    first = await flow.run("I want to run a 4:25 1500m")
    result = await flow.resume(first.run_id, message=ANSWERS)
    told = [m.content for m in result.messages if m.role == "tool"][-2:]
    assert "field: Input should be 'age', 'sex'," in told[0]
    assert "answers.age: Input should be a valid integer" in told[1]
    assert result.data.get("answers", {}) == {}
    assert (result.status, result.phase) == ("awaiting_input", "intake")


async def test_a_safety_field_the_form_forgot_is_asked_for_before_safety_runs() -> None:
    schema = SCHEMA | {"fields": SCHEMA["fields"][:1]}  # the analyst asked only the age
    script = [
        call("set_goal", {"goal": "run a 4:25 1500m"}),
        call("submit_intake_schema", schema),
        text("How old are you?"),
        call("collect_data", {"field": "age", "value": 43}),
        text("Thanks! How far do you run a week, how many days, and any injuries?"),
    ]
    flow, model = flow_with(script)
    first = await flow.run("I want to run a 4:25 1500m")
    result = await flow.resume(first.run_id, message="43")
    assert (result.status, result.phase) == ("awaiting_input", "intake")
    told = model.requests[-1].messages[0].content
    assert "Still missing: age, weekly_volume, injury_history, training_days" in told  # type: ignore[operator]
    assert "- weekly_volume (required): What's your current weekly running volume" in told  # type: ignore[operator]
    assert "4. Do NOT offer training advice. Do NOT generate a plan." in told  # type: ignore[operator]
    assert "I want to make sure I build you the right plan" in told  # type: ignore[operator]


def test_the_seeds_own_answers_fire_the_stress_fracture_rule() -> None:
    check = safety_check(DEFAULT_RULES)
    seed = {"age": 43, "training_days": 5, "injury_history": "stress fracture", "weekly_volume": 70}
    verdict = check({"answers": seed})["safety"]
    assert verdict["status"] == "approved_with_warnings"
    assert [f["rule"] for f in verdict["flags"]] == ["stress_fracture_volume"]


def test_a_rule_whose_field_is_unanswered_blocks_instead_of_passing() -> None:
    check = safety_check(DEFAULT_RULES)
    verdict = check({"answers": {"age": 43, "training_days": 5, "injury_history": "none"}})
    assert verdict["safety"]["status"] == "blocked"  # weekly_volume unknown: cannot be cleared
    assert verdict["safety"]["blocked"] == ["The safety check needs weekly_volume before a plan."]
