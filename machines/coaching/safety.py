"""The safety phase: deterministic rules over the athlete's profile (the seed's "Option A"),
each naming the fields it reads. The rules' fields are checked against `IntakeData` when the
flow is built (a rule over a field that does not exist is a `DefinitionError`); a rule whose
field is absent at run time cannot pass: the verdict blocks, asking for the field (fail
closed, never "no flag" for want of an answer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from loopstate.engine.errors import DefinitionError
from loopstate.machines.coaching.shapes import Flag, IntakeData, SafetyResult, known
from loopstate.machines.flows import FlowData, reads
from loopstate.machines.flows.typed import absent, field_error


@dataclass(frozen=True)
class SafetyRule:
    """`applies(profile)` true means the rule fires. It is called only when every field in
    `reads` is answered. A block clears `clears` so that intake asks them again."""

    name: str
    reads: tuple[str, ...]
    applies: Callable[[IntakeData], bool]
    message: str
    action: Literal["block", "warn", "flag_for_review"]
    contraindication: str | None = None
    recommendation: str | None = None
    clears: tuple[str, ...] = ()


def _has(text: str | None, *words: str) -> bool:
    return any(w in (text or "").lower() for w in words)


def _n(value: float | None) -> float:
    assert value is not None, "a rule runs only once its fields are answered"
    return value


DEFAULT_RULES: tuple[SafetyRule, ...] = (
    SafetyRule(
        "chest_symptoms",
        ("injury_history",),
        lambda p: _has(p.injury_history, "chest pain", "fainting"),
        "Chest pain or fainting needs a doctor's clearance before any training plan.",
        "block",
        clears=("injury_history",),
    ),
    SafetyRule(
        "masters_daily_training",
        ("age", "training_days"),
        lambda p: _n(p.age) > 50 and _n(p.training_days) > 6,
        "Training 7 days/week at 50+ increases injury risk significantly.",
        "warn",
        recommendation="Keep at least one full recovery day each week.",
    ),
    SafetyRule(
        "stress_fracture_volume",
        ("injury_history", "weekly_volume"),
        lambda p: _has(p.injury_history, "stress fracture") and _n(p.weekly_volume) > 60,
        "History of stress fractures with high volume - recommend medical clearance.",
        "flag_for_review",
        contraindication="No increase in weekly volume; reduce it given the stress fracture "
        "history.",
    ),
    SafetyRule(
        "high_volume_masters",
        ("age", "weekly_volume"),
        lambda p: _n(p.age) > 40 and _n(p.weekly_volume) > 80,
        "High weekly volume past 40: a person should review the plan.",
        "flag_for_review",
        recommendation="Build in a down week every third or fourth week.",
    ),
)


def check_rules(rules: Sequence[SafetyRule]) -> tuple[str, ...]:
    """The fields `rules` read, once each names only `IntakeData`'s fields; a
    `DefinitionError` naming the rule and the field otherwise."""
    for rule in rules:
        for name in (*rule.reads, *rule.clears):
            if (error := field_error(IntakeData, name)) is not None:
                raise DefinitionError(f"safety rule {rule.name!r} reads {name!r}: {error}")
    read = {f for r in rules for f in r.reads}
    return tuple(f for f in IntakeData.model_fields if f in read)  # in the profile's order


def safety_check(rules: Sequence[SafetyRule]) -> Callable[[FlowData], FlowData]:
    """The safety phase's action: apply `rules` to the answers, record the verdict."""
    needed = check_rules(rules)

    @reads(*(f"answers.{name}" for name in needed))
    def check(data: FlowData) -> FlowData:
        profile = known(data).answers
        unknown = {r.name: absent(profile, r.reads) for r in rules}
        fired = [r for r in rules if not unknown[r.name] and r.applies(profile)]
        blocks = [r for r in fired if r.action == "block"]
        answers = dict(data.get("answers", {}))
        for name in (n for r in blocks for n in r.clears):
            answers.pop(name, None)
        lacking = sorted({n for names in unknown.values() for n in names})
        blocked = [r.message for r in blocks] + [
            f"The safety check needs {name} before a plan." for name in lacking
        ]
        status = "blocked" if blocked else "approved_with_warnings" if fired else "approved"
        verdict = SafetyResult(
            status=status,
            warnings=[r.message for r in fired if r.action == "warn"],
            contraindications=[r.contraindication for r in fired if r.contraindication],
            recommendations=[r.recommendation for r in fired if r.recommendation],
            flags=[
                Flag(rule=r.name, reason=r.message) for r in fired if r.action == "flag_for_review"
            ],
            blocked=blocked,
        )
        return {**data, "answers": answers, "safety": verdict.model_dump(mode="json")}

    return check
