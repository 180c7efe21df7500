"""What each coaching phase's model is told: the seed's prompts and their rules.

The unspoken understanding: the coach acts on what it understands about the athlete (life
stage, history) through the questions it asks, and never names a framework, an age group or a
reframe to the user. Safety is told as care, not as a liability waiver.
"""

from __future__ import annotations

import json

from loopstate.machines.coaching.shapes import IntakeData, known, missing_required
from loopstate.machines.flows import FlowData

NEVER_NAME = (
    "Never name a framework, a book, an age group or a research finding to the user, and never "
    "tell them their goal is wrong: act on what you understand through the questions you ask."
)


def goal_instructions(data: FlowData) -> str:
    """GOAL_CAPTURE: the goal in the user's words; after a reframe, the analyst's questions."""
    coaching = known(data)
    reframe = coaching.reframe
    if reframe is None:
        return (
            "You are a running coach. Find out the user's goal, in their own words, and record "
            f"it with set_goal. {NEVER_NAME}"
        )
    asks = "\n".join(f"- {q}" for q in reframe.questions)
    return (
        f"You are a running coach. The user's goal was: {reframe.stated_goal}. Before planning, "
        f"ask them these questions naturally, one or two at a time:\n{asks}\n"
        "Internal, never to be said: the goal is best served inside this larger one: "
        f"{reframe.internal_goal}. When the user has answered and restated or confirmed their "
        f"goal, record it with set_goal, in their words. {NEVER_NAME}"
    )


def analyst_instructions(data: FlowData) -> str:
    """ANALYST: the seed's prompt; after a reframe, the note that the user has reconsidered."""
    coaching = known(data)
    text = ANALYST.replace("{goal}", str(coaching.goal))
    if coaching.reframe is not None:
        text += (
            f"\nThe user has already reconsidered their goal (first stated: "
            f"{coaching.reframe.stated_goal}) after questions toward: "
            f"{coaching.reframe.internal_goal}. Do not reframe it again: write the form."
        )
    return text


ANALYST = (
    "You are a sports science analyst. The user's goal: {goal}. Determine the MINIMUM data "
    "points required to create a safe, personalized training plan.\n"
    "Consider:\n- Physiological factors (age, sex, injury history)\n"
    "- Current fitness indicators (recent times, weekly volume)\n"
    "- Contextual factors (timeline, equipment access, schedule constraints)\n"
    "- Safety factors (any red flags that need medical clearance)\n"
    "- Life stage appropriateness (is this goal aligned with sustainable health?)\n"
    "Submit the form with submit_intake_schema: the goal analysis; each field with its "
    "field_name (only the names the schema allows), the question, the internal reason (NOT "
    "shown to the user), an optional user_facing_reason, its priority and validation; the "
    "safety flags you see. If the goal may benefit from reframing and the user has not yet "
    "reconsidered it, give a reframe: the larger goal (internal) and questions that help the "
    "user discover the relevant constraints themselves. Do NOT tell them their goal is wrong."
)


def intake_instructions(data: FlowData) -> str:
    """INTAKE: the seed's rules, the form, what is known and what is still missing."""
    coaching = known(data)
    assert coaching.intake_schema is not None
    lines = [
        f"- {f.field_name} ({f.priority}): {f.question}"
        + (f" [if asked why: {f.user_facing_reason}]" if f.user_facing_reason else "")
        for f in coaching.intake_schema.fields
    ]
    asked = {f.field_name for f in coaching.intake_schema.fields}
    lines += [
        f"- {n} (required): {IntakeData.model_fields[n].description}"
        for n in coaching.safety_fields
        if n not in asked
    ]
    blocked = coaching.safety.blocked if coaching.safety is not None else []
    note = f"\nBefore a plan, this needs care: {' '.join(blocked)}" if blocked else ""
    answers = coaching.answers.model_dump(exclude_none=True)
    return (
        "You are a friendly running coach assistant gathering information before creating a "
        "training plan. Your ONLY job is to collect these data points, each with collect_data:\n"
        f"{chr(10).join(lines)}\n"
        "Rules:\n1. Ask questions naturally, not like a form. Acknowledge what the user shares.\n"
        "2. You may ask multiple related questions in one turn if it flows naturally.\n"
        "3. If the user provides information unprompted, acknowledge and record it "
        '(confidence "inferred" when you concluded it rather than heard it).\n'
        "4. Do NOT offer training advice. Do NOT generate a plan.\n"
        '5. If the user asks for a plan, say: "I want to make sure I build you the right plan - '
        'let me just get a few more details first."\n'
        "6. When all required fields are gathered, confirm the summary and ask if anything is "
        f"missing or incorrect.\nAnswers so far: {json.dumps(answers)}\n"
        f"Still missing: {', '.join(missing_required(data)) or 'nothing'}{note}\n"
        "Say anything about safety as a coach who cares, never as a warning to acknowledge. "
        + NEVER_NAME
    )


def plan_instructions(data: FlowData) -> str:
    """PLAN: the seed's prompt, with the safety constraints it must respect."""
    coaching = known(data)
    safety = coaching.safety
    feedback = coaching.feedback.notes if coaching.feedback is not None else ""
    return (
        "You are an expert running coach creating a personalized training plan.\n"
        f"Athlete Profile:\n{coaching.answers.model_dump_json(exclude_none=True)}\n"
        f"Goal: {coaching.goal}\nTimeline: {coaching.answers.target_race_date or 'not given'}\n"
        "Safety Constraints:\n"
        f"- Warnings: {safety.warnings if safety else []}\n"
        f"- Contraindications: {safety.contraindications if safety else []}\n"
        f"- Recommendations: {safety.recommendations if safety else []}\n"
        "Create a periodized training plan that:\n"
        "1. Respects the athlete's current fitness level and available time\n"
        "2. Incorporates appropriate progressions\n3. Avoids all contraindicated activities\n"
        "4. Addresses the safety warnings appropriately\n"
        "Output the plan as a structured TrainingBlock with generate_plan.\n"
        + (f"Revise the previous plan: {feedback}\n" if feedback else "")
    )


PRESENT = (
    "Present this plan to the user and explain the reasoning behind its key decisions: {plan}. "
    'Answer questions ("Why did you include X?", "Can I swap Y for Z?"). When the user accepts '
    "it, asks for changes, or wants another goal, call respond_to_plan. Say anything about "
    f"safety as a coach who cares, never as a liability warning. {NEVER_NAME}"
)
