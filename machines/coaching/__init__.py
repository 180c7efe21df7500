"""The coaching flow, a worked example of the seed's Health Coach flow: goal → analysis (with
an implicit reframe) → intake → safety → plan → present.

The analyst writes the intake form (an `IntakeSchema` over `IntakeData`'s fields); the gate to
safety is code that checks every required answer, and every field the safety rules read,
whatever the model says. Safety is deterministic rules naming their fields (checked when the
flow is built; an absent field blocks instead of passing). A plan waits for a person only when
a rule flagged the athlete. Build it with `coaching_flow(models=..., store=...)`.
"""

from loopstate.machines.coaching.flow import (
    MODELS,
    PHASES,
    CoachingFlow,
    coaching_flow,
    collect_data,
    flagged,
    respond_to_plan,
    set_goal,
)
from loopstate.machines.coaching.safety import DEFAULT_RULES, SafetyRule, safety_check
from loopstate.machines.coaching.shapes import (
    CoachingData,
    IntakeData,
    IntakeField,
    IntakeSchema,
    SafetyResult,
    TrainingBlock,
    missing_required,
)

__all__ = [
    "DEFAULT_RULES",
    "MODELS",
    "PHASES",
    "CoachingData",
    "CoachingFlow",
    "IntakeData",
    "IntakeField",
    "IntakeSchema",
    "SafetyResult",
    "SafetyRule",
    "TrainingBlock",
    "coaching_flow",
    "collect_data",
    "flagged",
    "missing_required",
    "respond_to_plan",
    "safety_check",
    "set_goal",
]
