"""The coaching flow's data, in the seed's shapes: the athlete's profile (`IntakeData`), the
form the analyst writes (`IntakeSchema`, with its goal analysis, safety flags and an optional
implicit reframe), the safety verdict (`SafetyResult`) and the plan (`TrainingBlock`).

Every model refuses keys it does not know (`extra="forbid"`): a model's stray key is an error
it is told about, never silently dropped. `CoachingData` is the flow's `data=` model.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FlowData = dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IntakeData(_Strict):
    """What the coach may know about the athlete; every field is optional until answered.
    A field's description is the question asked when no form gives one."""

    age: int | None = Field(None, ge=5, le=120, description="How old are you?")
    sex: str | None = Field(None, description="What is your sex?")
    current_1500_time: str | None = Field(None, description="Your current 1500m time?")
    recent_race: str | None = Field(None, description="Any recent race times (5K, mile...)?")
    weekly_volume: float | None = Field(
        None, ge=0, description="What's your current weekly running volume, in km?"
    )
    injury_history: str | None = Field(
        None, description="Any current injuries or recurring issues I should know about?"
    )
    training_days: int | None = Field(
        None, ge=0, le=7, description="How many days per week can you train?"
    )
    sleep_hours: float | None = Field(None, ge=0, le=24, description="How much do you sleep?")
    target_race_date: str | None = Field(None, description="When are you hoping to hit it?")
    track_access: bool | None = Field(None, description="Do you have access to a track?")
    equipment: str | None = Field(None, description="What equipment can you use?")
    schedule: str | None = Field(None, description="Any schedule constraints?")


IntakeFieldName = Literal[
    "age", "sex", "current_1500_time", "recent_race", "weekly_volume", "injury_history",
    "training_days", "sleep_hours", "target_race_date", "track_access", "equipment", "schedule",
]  # fmt: skip
"""The names a form may ask for: exactly `IntakeData`'s fields (a test keeps them equal)."""


class Validation(_Strict):
    kind: Literal["number", "text", "choice"] = "text"
    min: float | None = None
    max: float | None = None
    choices: list[str] = Field(default_factory=list)


class IntakeField(_Strict):
    field_name: IntakeFieldName
    question: str = Field(description="natural language question to ask the user")
    reason: str = Field(description="internal: why it matters (NOT shown to the user)")
    user_facing_reason: str | None = Field(
        None, description="optional brief context, if the question seems unusual"
    )
    priority: Literal["required", "recommended", "optional"]
    validation: Validation = Field(default_factory=Validation)


class GoalAnalysis(_Strict):
    goal_type: Literal["performance", "fitness", "weight_loss", "health"]
    sport: str
    event: str | None = None
    target_metric: str | None = Field(None, description='e.g. "4:25"')


class AnalystFlag(_Strict):
    """A risk the analyst sees for this athlete, for the reviewer (never evaluated as code:
    the safety phase's rules are)."""

    condition: str = Field(description='e.g. "age > 40 AND weekly_volume > 80"')
    action: str = Field(description='e.g. "flag_high_volume_masters"')


class Reframe(_Strict):
    """The analyst's implicit reframe: the larger goal the stated one should sit inside, and
    questions that let the user discover the constraints themselves. Never shown as such."""

    internal_goal: str = Field(description="internal, never shown to the user")
    questions: list[str] = Field(min_length=1, max_length=5)


class IntakeSchema(_Strict):
    """The minimum data needed to plan safely for the user's goal."""

    goal_analysis: GoalAnalysis
    fields: list[IntakeField] = Field(min_length=1)
    safety_flags: list[AnalystFlag] = Field(default_factory=list)
    reframe: Reframe | None = Field(
        None, description="only when the goal should be reconsidered before any intake"
    )

    @model_validator(mode="after")
    def _coherent(self) -> IntakeSchema:
        names = [f.field_name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("field names must be unique")
        if not any(f.priority == "required" for f in self.fields):
            raise ValueError("at least one field must be required")
        return self


class KeptReframe(Reframe):
    """A reframe the flow went through once: with the goal as the user first stated it."""

    stated_goal: str | None = None


class Flag(_Strict):
    """A safety rule that flagged the plan for a person's review, and why."""

    rule: str
    reason: str


class SafetyResult(_Strict):
    status: Literal["approved", "approved_with_warnings", "blocked"]
    warnings: list[str] = Field(default_factory=list)
    contraindications: list[str] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)
    flags: list[Flag] = Field(default_factory=list)
    blocked: list[str] = Field(default_factory=list)
    """Why it blocks: a rule's message, or a field a rule needs that is absent."""


class Session(_Strict):
    day: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    kind: str
    minutes: int = Field(gt=0, le=300)
    description: str


class TrainingBlock(_Strict):
    """A periodized block of training for the athlete's goal."""

    title: str
    weeks: int = Field(ge=1, le=16)
    sessions: list[Session] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)


class Feedback(_Strict):
    decision: Literal["accept", "refine", "change_goal"]
    notes: str = ""


class CoachingData(_Strict):
    """Everything the coaching flow collects (its `Flow(data=...)`)."""

    goal: str | None = None
    reframe: KeptReframe | None = None
    intake_schema: IntakeSchema | None = None
    answers: IntakeData = Field(default_factory=IntakeData)
    confidence: dict[str, Literal["explicit", "inferred"]] = Field(default_factory=dict)
    safety_fields: list[IntakeFieldName] = Field(default_factory=list)
    """What the safety rules read: the intake gate asks for these too."""
    safety: SafetyResult | None = None
    plan: TrainingBlock | None = None
    feedback: Feedback | None = None


def known(data: dict[str, Any]) -> CoachingData:
    """The flow's data (JSON) read as `CoachingData`."""
    return CoachingData.model_validate(data)


def answer_error(rule: Validation, name: str, value: Any) -> str | None:
    """Why `value` breaks the analyst's validation `rule` for field `name`, or None."""
    if rule.kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} must be a number"
        if rule.min is not None and value < rule.min:
            return f"{name} must be at least {rule.min:g}"
        if rule.max is not None and value > rule.max:
            return f"{name} must be at most {rule.max:g}"
        return None
    if rule.kind == "choice" and value not in rule.choices:
        return f"{name} must be one of {rule.choices}"
    return None if str(value).strip() else f"{name} must not be empty"


def missing_required(data: FlowData) -> list[str]:
    """Required fields (the form's, and what the safety rules read) without a valid answer."""
    coaching = known(data)
    schema = coaching.intake_schema
    if schema is None:
        return ["intake_schema"]
    answers = coaching.answers.model_dump()
    specs = {f.field_name: f for f in schema.fields}
    names = [f.field_name for f in schema.fields if f.priority == "required"]
    names += [n for n in coaching.safety_fields if n not in names]
    return [
        n
        for n in names
        if answers.get(n) is None
        or (n in specs and answer_error(specs[n].validation, n, answers[n]) is not None)
    ]
