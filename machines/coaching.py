"""The coaching flow, a worked example: goal → analysis → intake → safety → plan → present.

    goal_capture ─[goal_set]→ analyst ─[schema_ready]→ intake ─[intake_complete]→ safety
    safety ─[safety_cleared]→ plan ─[plan_ready]→ present ─[plan_accepted]→ done
    safety ─[safety_blocked]→ intake          present ─[refinement_requested]→ plan
    present ─[goal_changed]→ goal_capture

The analyst writes the intake form (an `IntakeSchema`); the gate to safety is code that checks
every required answer against that form, whatever the model says. Safety is deterministic
rules; a block sends the user back to intake with the fields it concerns cleared.
`generate_plan` needs approval. Build it with `coaching_flow(models=..., store=...)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from statemachine import State

from loopstate.engine.tool import ToolContext
from loopstate.machines.flows import (
    Flow,
    FlowData,
    FlowDeps,
    FlowMachine,
    Output,
    Phase,
    has_tool_call,
)
from loopstate.tools.decorator import tool

# -- the intake form the analyst writes ----------------------------------------------------


class Validation(BaseModel):
    kind: Literal["number", "text", "choice"] = "text"
    min: float | None = None
    max: float | None = None
    choices: list[str] = Field(default_factory=list)


class IntakeField(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    question: str
    reason: str = Field(description="internal: why it matters (never shown to the user)")
    priority: Literal["required", "recommended", "optional"]
    validation: Validation = Field(default_factory=Validation)


class IntakeSchema(BaseModel):
    """The minimum data needed to plan safely for the user's goal."""

    goal_summary: str
    fields: list[IntakeField] = Field(min_length=1)

    @model_validator(mode="after")
    def _coherent(self) -> IntakeSchema:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("field names must be unique")
        if not any(f.priority == "required" for f in self.fields):
            raise ValueError("at least one field must be required")
        return self


def answer_error(field: IntakeField, value: Any) -> str | None:
    """Why `value` is not a valid answer to `field`, or None."""
    rule = field.validation
    if rule.kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{field.name} must be a number"
        if rule.min is not None and value < rule.min:
            return f"{field.name} must be at least {rule.min:g}"
        if rule.max is not None and value > rule.max:
            return f"{field.name} must be at most {rule.max:g}"
        return None
    if rule.kind == "choice" and value not in rule.choices:
        return f"{field.name} must be one of {rule.choices}"
    return None if str(value).strip() else f"{field.name} must not be empty"


def missing_required(data: FlowData) -> list[str]:
    """Required fields without a valid answer (all of them when there is no form yet)."""
    if "intake_schema" not in data:
        return ["intake_schema"]
    schema = IntakeSchema.model_validate(data["intake_schema"])
    answers = data.get("answers", {})
    return [
        f.name
        for f in schema.fields
        if f.priority == "required"
        and (f.name not in answers or answer_error(f, answers[f.name]) is not None)
    ]


# -- safety: deterministic rules -------------------------------------------------------------


@dataclass(frozen=True)
class SafetyRule:
    """`applies(answers)` true means the rule fires; `fields` are cleared when it blocks."""

    name: str
    applies: Callable[[dict[str, Any]], bool]
    message: str
    action: Literal["block", "warn", "flag_for_review"]
    fields: tuple[str, ...] = ()


def _num(answers: dict[str, Any], key: str) -> float:
    value = answers.get(key, 0)
    return float(value) if isinstance(value, int | float) else 0.0


def _text(answers: dict[str, Any], key: str) -> str:
    return str(answers.get(key, "")).lower()


DEFAULT_RULES: tuple[SafetyRule, ...] = (
    SafetyRule(
        "chest_symptoms",
        lambda a: any(w in _text(a, "injury_history") for w in ("chest pain", "fainting")),
        "Chest pain or fainting needs a doctor's clearance before any training plan.",
        "block",
        ("injury_history",),
    ),
    SafetyRule(
        "masters_daily_training",
        lambda a: _num(a, "age") > 50 and _num(a, "training_days") > 6,
        "Training 7 days a week past 50 raises injury risk significantly.",
        "warn",
    ),
    SafetyRule(
        "stress_fracture_volume",
        lambda a: "stress fracture" in _text(a, "injury_history") and _num(a, "weekly_km") > 60,
        "Stress fracture history with high volume: recommend medical review.",
        "flag_for_review",
    ),
)


def safety_check(rules: Sequence[SafetyRule]) -> Callable[[FlowData], FlowData]:
    """The safety phase's action: apply `rules` to the answers, record the verdict."""

    def check(data: FlowData) -> FlowData:
        answers = dict(data.get("answers", {}))
        fired = [r for r in rules if r.applies(answers)]
        blocks = [r for r in fired if r.action == "block"]
        for rule in blocks:
            for name in rule.fields:
                answers.pop(name, None)
        status = "blocked" if blocks else "approved_with_warnings" if fired else "approved"
        verdict = {
            "status": status,
            "blocked": [r.message for r in blocks],
            "warnings": [r.message for r in fired if r.action == "warn"],
            "flags": [r.message for r in fired if r.action == "flag_for_review"],
        }
        return {**data, "answers": answers, "safety": verdict}

    return check


# -- the plan --------------------------------------------------------------------------------


class Session(BaseModel):
    day: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    kind: str
    minutes: int = Field(gt=0, le=300)
    description: str


class TrainingBlock(BaseModel):
    """A periodized block of training for the athlete's goal."""

    title: str
    weeks: int = Field(ge=1, le=16)
    sessions: list[Session] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)


# -- tools and how their results change the data ---------------------------------------------


@tool
def set_goal(goal: str) -> str:
    """Record the user's goal, in their own words."""
    return f"goal recorded: {goal}"


@tool
def collect_data(field: str, value: str | float, ctx: ToolContext[FlowDeps]) -> str:
    """Record the user's answer to one intake field (numbers as numbers).

    Args:
        field: the field's name in the intake form
        value: the user's answer
    """
    schema = IntakeSchema.model_validate(ctx.deps.data["intake_schema"])
    spec = next((f for f in schema.fields if f.name == field), None)
    if spec is None:
        raise ValueError(f"no field {field!r}; fields: {[f.name for f in schema.fields]}")
    error = answer_error(spec, value)
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
    return {**data, "answers": {**data.get("answers", {}), args["field"]: args["value"]}}


def _record_feedback(data: FlowData, args: dict[str, Any]) -> FlowData:
    return {**data, "feedback": {"decision": args["decision"], "notes": args.get("notes", "")}}


def _drop(*keys: str) -> Callable[[FlowData], FlowData]:
    return lambda data: {k: v for k, v in data.items() if k not in keys}


# -- the machine: phases and gates ---------------------------------------------------------


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

    def goal_set(self, data: FlowData) -> bool:
        return bool(data.get("goal"))

    def schema_ready(self, data: FlowData) -> bool:
        return "intake_schema" in data

    def intake_complete(self, data: FlowData) -> bool:
        return not missing_required(data)

    def safety_cleared(self, data: FlowData) -> bool:
        return _safety(data) in ("approved", "approved_with_warnings")

    def safety_blocked(self, data: FlowData) -> bool:
        return _safety(data) == "blocked"

    def plan_ready(self, data: FlowData) -> bool:
        return "plan" in data

    def plan_accepted(self, data: FlowData) -> bool:
        return _feedback(data) == "accept"

    def refinement_requested(self, data: FlowData) -> bool:
        return _feedback(data) == "refine"

    def goal_changed(self, data: FlowData) -> bool:
        return _feedback(data) == "change_goal"


def _safety(data: FlowData) -> str:
    return str(data.get("safety", {}).get("status"))


def _feedback(data: FlowData) -> str | None:
    feedback = data.get("feedback")
    return str(feedback.get("decision")) if isinstance(feedback, dict) else None


# -- instructions ----------------------------------------------------------------------------


def _intake_instructions(data: FlowData) -> str:
    schema = IntakeSchema.model_validate(data["intake_schema"])
    lines = [f"- {f.name} ({f.priority}): {f.question}" for f in schema.fields]
    blocked = data.get("safety", {}).get("blocked", [])
    note = ""
    if blocked:
        note = f"\nA safety check stopped the plan: {' '.join(blocked)} Explain, ask again."
    return (
        "You are a friendly coach gathering information before a plan. Ask naturally; record "
        "every answer with collect_data. Do not give training advice.\n"
        f"Fields:\n{chr(10).join(lines)}\nAnswers so far: {json.dumps(data.get('answers', {}))}\n"
        f"Still missing: {', '.join(missing_required(data)) or 'nothing'}{note}"
    )


def _plan_instructions(data: FlowData) -> str:
    safety = data.get("safety", {})
    feedback = data.get("feedback", {}).get("notes", "")
    return (
        "You are an expert coach. Create a periodized TrainingBlock with generate_plan.\n"
        f"Goal: {data.get('goal')}\nAthlete: {json.dumps(data.get('answers', {}))}\n"
        f"Warnings: {safety.get('warnings', [])}\nReview flags: {safety.get('flags', [])}\n"
        + (f"Revise the previous plan: {feedback}\n" if feedback else "")
    )


PHASES: dict[str, Phase] = {
    "goal_capture": Phase(
        instructions="You are a coach. Find out the user's goal and record it with set_goal.",
        tools=[set_goal],
        updates={"set_goal": _record_goal},
        stop_when=[has_tool_call("set_goal")],
        waits_for_user=True,
        on_enter=_drop("goal", "intake_schema", "safety", "plan", "feedback"),
    ),
    "analyst": Phase(
        instructions=(
            "You are a sports science analyst. Goal: {goal}. Determine the minimum data needed "
            "for a safe, personal plan: each field with its question, internal reason, "
            "priority and validation."
        ),
        output=Output(IntakeSchema, tool="submit_intake_schema", key="intake_schema"),
    ),
    "intake": Phase(
        instructions=_intake_instructions,
        tools=[collect_data],
        updates={"collect_data": _record_answer},
        waits_for_user=True,
    ),
    "safety": Phase(action=safety_check(DEFAULT_RULES)),
    "plan": Phase(
        instructions=_plan_instructions,
        output=Output(TrainingBlock, tool="generate_plan", key="plan", needs_approval=True),
    ),
    "present": Phase(
        instructions=(
            "Present this plan and answer questions about it: {plan}. When the user accepts it, "
            "asks for changes, or wants another goal, call respond_to_plan."
        ),
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
    e.g. `{"default": "anthropic/claude-haiku-4-5"}`); `options` go to `Flow`."""
    phases = {**PHASES, "safety": Phase(action=safety_check(rules))}
    routes = {**MODELS, **(models or {})}
    return Flow(CoachingFlow, phases, name="coaching", models=routes, **options)
