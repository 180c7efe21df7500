"""The coaching flow's machine, tools, prompts and phases (the seed's Health Coach flow).

goal_capture ─[goal_set]→ analyst ─[schema_ready]→ intake ─[intake_complete]→ safety
analyst ─[reframe_goal]→ goal_capture            (the implicit reframe, once per goal)
safety ─[safety_cleared]→ plan ─[plan_ready]→ present ─[plan_accepted]→ done
safety ─[safety_blocked]→ intake          present ─[refinement_requested]→ plan
present ─[goal_changed]→ goal_capture
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from statemachine import State

from loopstate.engine.approval import Gate
from loopstate.engine.tool import ToolContext
from loopstate.machines.coaching.prompts import (
    PRESENT,
    analyst_instructions,
    goal_instructions,
    intake_instructions,
    plan_instructions,
)
from loopstate.machines.coaching.safety import DEFAULT_RULES, SafetyRule, check_rules, safety_check
from loopstate.machines.coaching.shapes import (
    CoachingData,
    IntakeFieldName,
    IntakeSchema,
    TrainingBlock,
    answer_error,
    known,
    missing_required,
)
from loopstate.machines.flows import (
    Flow,
    FlowData,
    FlowDeps,
    FlowMachine,
    Output,
    Phase,
    has_tool_call,
    reads,
)
from loopstate.tools.decorator import tool

# -- tools and how their results change the data ---------------------------------------------


@tool
def set_goal(goal: str) -> str:
    """Record the user's goal, in their own words."""
    return f"goal recorded: {goal}"


@tool
def collect_data(
    field: IntakeFieldName,
    value: str | float | bool,
    ctx: ToolContext[FlowDeps],
    confidence: Literal["explicit", "inferred"] = "explicit",
) -> str:
    """Record a piece of information the user gave (numbers as numbers).

    Args:
        field: the field's name
        value: the user's answer
        confidence: "explicit" if the user said it, "inferred" if you concluded it
    """
    schema = known(dict(ctx.deps.data)).intake_schema
    spec = next((f for f in schema.fields if f.field_name == field), None) if schema else None
    error = answer_error(spec.validation, field, value) if spec is not None else None
    if error is not None:
        raise ValueError(error)
    return f"recorded {field}"


@tool
def respond_to_plan(decision: Literal["accept", "refine", "change_goal"], notes: str = "") -> str:
    """Record what the user wants done with the plan.

    Args:
        decision: accept it, refine it, or start over with another goal
        notes: what to change, or the new goal
    """
    return f"noted: {decision}"


def _record_goal(data: FlowData, args: dict[str, Any]) -> FlowData:
    return {**data, "goal": args["goal"]}


def _record_answer(data: FlowData, args: dict[str, Any]) -> FlowData:
    field = args["field"]
    answers = {**data.get("answers", {}), field: args["value"]}
    confidence = {**data.get("confidence", {}), field: args.get("confidence", "explicit")}
    return {**data, "answers": answers, "confidence": confidence}


def _record_feedback(data: FlowData, args: dict[str, Any]) -> FlowData:
    return {**data, "feedback": {"decision": args["decision"], "notes": args.get("notes", "")}}


def flagged(plan: TrainingBlock, ctx: ToolContext[FlowDeps]) -> bool | Gate:
    """A plan waits for a person only when the safety check flagged the athlete."""
    safety = known(dict(ctx.deps.data)).safety
    if safety is None or not safety.flags:
        return False
    reasons = "; ".join(f"{f.rule}: {f.reason}" for f in safety.flags)
    return Gate(description=f"safety flags: {reasons}", metadata={"plan": plan.title})


# -- the machine: phases and gates -------------------------------------------------------------


class CoachingFlow(FlowMachine):
    """The coaching flow's phases; every gate is a method over the collected data."""

    goal_capture = State(initial=True)
    analyst = State()
    intake = State()
    safety = State()
    plan = State()
    present = State()
    done = State(final=True)
    failed = State(final=True)
    aborted = State(final=True)

    advance = (
        goal_capture.to(analyst, cond="goal_set")
        | analyst.to(goal_capture, cond="reframe_goal")
        | analyst.to(intake, cond="schema_ready")
        | intake.to(safety, cond="intake_complete")
        | safety.to(plan, cond="safety_cleared")
        | safety.to(intake, cond="safety_blocked")
        | plan.to(present, cond="plan_ready")
        | present.to(done, cond="plan_accepted")
        | present.to(plan, cond="refinement_requested")
        | present.to(goal_capture, cond="goal_changed")
    )
    user_replied = goal_capture.to(goal_capture) | intake.to(intake) | present.to(present)
    fail = failed.from_(goal_capture, analyst, intake, safety, plan, present)
    abort = aborted.from_(goal_capture, analyst, intake, safety, plan, present)

    @reads("goal")
    def goal_set(self, data: CoachingData) -> bool:
        return bool(data.goal and data.goal.strip())

    @reads("intake_schema.reframe")
    def reframe_goal(self, data: CoachingData) -> bool:
        """The analyst asks to reframe, and this goal has not been reframed yet."""
        return data.reframe is None

    @reads("intake_schema")
    def schema_ready(self, data: CoachingData) -> bool:
        assert data.intake_schema is not None
        return data.intake_schema.reframe is None or data.reframe is not None

    @reads("intake_schema")
    def intake_complete(self, data: CoachingData) -> bool:
        return not missing_required(data.model_dump(mode="json", exclude_unset=True))

    @reads("safety.status")
    def safety_cleared(self, data: CoachingData) -> bool:
        assert data.safety is not None
        return data.safety.status in ("approved", "approved_with_warnings")

    @reads("safety.status")
    def safety_blocked(self, data: CoachingData) -> bool:
        assert data.safety is not None
        return data.safety.status == "blocked"

    @reads("plan")
    def plan_ready(self, data: CoachingData) -> bool:
        return True

    @reads("feedback.decision")
    def plan_accepted(self, data: CoachingData) -> bool:
        return data.feedback is not None and data.feedback.decision == "accept"

    @reads("feedback.decision")
    def refinement_requested(self, data: CoachingData) -> bool:
        return data.feedback is not None and data.feedback.decision == "refine"

    @reads("feedback.decision")
    def goal_changed(self, data: CoachingData) -> bool:
        return data.feedback is not None and data.feedback.decision == "change_goal"


def _enter_goal_capture(data: FlowData) -> FlowData:
    """Back to the goal: after the analyst's reframe, keep it (and the goal as first stated)
    for the questions; otherwise (a new goal) start over. The answers are kept either way."""
    kept: FlowData = {k: data[k] for k in ("answers", "confidence") if k in data}
    reframe = (data.get("intake_schema") or {}).get("reframe")
    if reframe and not data.get("reframe"):
        kept["reframe"] = {**reframe, "stated_goal": data.get("goal")}
    return kept


def _needing(fields: Sequence[str]) -> Any:
    def enter(data: FlowData) -> FlowData:
        return {**data, "safety_fields": list(fields)}

    return enter


def _drop(*keys: str) -> Any:
    return lambda data: {k: v for k, v in data.items() if k not in keys}


PHASES: dict[str, Phase] = {
    "goal_capture": Phase(
        instructions=goal_instructions,
        tools=[set_goal],
        updates={"set_goal": _record_goal},
        stop_when=[has_tool_call("set_goal")],
        waits_for_user=True,
        on_enter=_enter_goal_capture,
    ),
    "analyst": Phase(
        instructions=analyst_instructions,
        output=Output(IntakeSchema, tool="submit_intake_schema", key="intake_schema"),
    ),
    "intake": Phase(
        instructions=intake_instructions,
        tools=[collect_data],
        updates={"collect_data": _record_answer},
        waits_for_user=True,
        on_enter=_needing(check_rules(DEFAULT_RULES)),
    ),
    "safety": Phase(action=safety_check(DEFAULT_RULES)),
    "plan": Phase(
        instructions=plan_instructions,
        output=Output(TrainingBlock, tool="generate_plan", key="plan", needs_approval=flagged),
    ),
    "present": Phase(
        instructions=PRESENT,
        tools=[respond_to_plan],
        updates={"respond_to_plan": _record_feedback},
        stop_when=[has_tool_call("respond_to_plan")],
        waits_for_user=True,
        on_enter=_drop("feedback"),
    ),
}

MODELS = {"analyst": "anthropic/claude-sonnet-4-5", "plan": "anthropic/claude-sonnet-4-5"}
"""A reasoning model where the work is thinking; the flow's `default` model elsewhere."""


def coaching_flow(
    *,
    rules: Sequence[SafetyRule] = DEFAULT_RULES,
    models: dict[str, Any] | None = None,
    **options: Any,
) -> Flow:
    """The coaching flow. `models` overrides the routing per phase (`"default"` for the rest,
    e.g. `{"default": "anthropic/claude-haiku-4-5"}`); `options` go to `Flow`. `rules` are
    checked against `IntakeData` here (`DefinitionError` for a field it lacks)."""
    needed = check_rules(rules)
    phases = {
        **PHASES,
        "intake": replace(PHASES["intake"], on_enter=_needing(needed)),
        "safety": Phase(action=safety_check(rules)),
    }
    routes = {**MODELS, **(models or {})}
    return Flow(CoachingFlow, phases, data=CoachingData, name="coaching", models=routes, **options)
