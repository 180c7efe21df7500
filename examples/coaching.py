"""The seed's Health Coach flow, run offline: `python examples/coaching.py`.

A 43-year-old returning runner wants a 4:25 1500m. The analyst reframes the goal implicitly
(back to goal capture, where the coach asks about recovery and sleep, never saying why); the
user restates it; the analyst writes the intake form over `IntakeData`'s fields; intake
collects the answers; the safety rules flag the stress fracture at 70 km a week, so the plan
(its contraindications given to the planner) waits for a person, who answers `True` as seed
001's approver does. The run is streamed: each phase it enters is printed as it happens. The
models are scripted (no network); give `coaching_flow` litellm model names to run it for real.
"""

from __future__ import annotations

import asyncio
from typing import Any

from loopstate import ApprovalRequest, MemoryStore
from loopstate.machines.coaching import coaching_flow
from loopstate.testing import ScriptedModel, call, calls

GOAL = "I want to run a 4:25 1500m"
REFRAME = {
    "internal_goal": "Build sustainable speed with longevity as the foundation",
    "questions": ["How do you recover after a hard week?", "How much do you sleep?"],
}
FORM: dict[str, Any] = {
    "goal_analysis": {"goal_type": "performance", "sport": "running", "event": "1500m",
                      "target_metric": "4:25"},
    "fields": [
        {"field_name": name, "question": question, "reason": reason, "priority": "required"}
        for name, question, reason in [
            ("age", "How old are you?", "recovery capacity"),
            ("weekly_volume", "How many km a week do you run?", "safe progression"),
            ("injury_history", "Any injuries I should know about?", "contraindications"),
            ("training_days", "How many days a week can you train?", "plan structure"),
        ]
    ],
    "safety_flags": [{"condition": "injury_history contains 'stress fracture'",
                      "action": "require_medical_clearance"}],
}  # fmt: skip
ANSWERS = [
    ("age", 43),
    ("weekly_volume", 70),
    ("injury_history", "a stress fracture two years ago"),
    ("training_days", 5),
]
PLAN = {
    "title": "Durable speed",
    "weeks": 8,
    "sessions": [
        {"day": "tue", "kind": "intervals", "minutes": 45, "description": "6x300m, full rest"},
        {"day": "thu", "kind": "easy", "minutes": 40, "description": "flat, soft surface"},
        {"day": "sat", "kind": "long run", "minutes": 60, "description": "easy, no hills"},
    ],
    "notes": ["Volume held below 60 km a week (stress fracture history)."],
}


def coach() -> ScriptedModel:
    """The coach's turns, phase after phase, as a model would take them."""
    return ScriptedModel(
        [
            call("set_goal", {"goal": "run a 4:25 1500m"}),  # goal capture
            call("submit_intake_schema", FORM | {"reframe": REFRAME}),  # analyst: reframe
            "That's a solid goal. Before we map out the path to 4:25: how do you usually "
            "recover after a hard week, and how much do you sleep?",
            call("set_goal", {"goal": "a 4:25 1500m that I can keep running for years"}),
            call("submit_intake_schema", FORM),  # analyst again: the form
            "How old are you, how many km a week, how many days, and any injuries?",
            calls(*(call("collect_data", {"field": f, "value": v}) for f, v in ANSWERS)),
            "Thanks! That's everything I need.",
            call("generate_plan", PLAN),  # plan: flagged, so it waits for a person
            "Here is your 8-week block: speed with room to recover.",
            call("respond_to_plan", {"decision": "accept"}),  # present
        ],
        name="coach",
    )


def reviewer(requests: list[ApprovalRequest]) -> dict[str, bool]:
    """A person who approves what they are shown (a plain boolean, as seed 001's callback)."""
    return {r.call_id: True for r in requests}


async def turn(stream: Any) -> Any:
    """One turn of the conversation, streamed: the phases entered and the approvals asked."""
    async for event in stream:
        if event.kind == "phase_changed":
            print(f"  phase {event.source or '-'} → {event.target}")
        elif event.kind == "approval_requested":
            print(f"  asks a person: {event.tool} ({event.reason})")
        elif event.kind == "tool_approval" and event.outcome != "auto":
            print(f"  {event.outcome}d by {event.actor}")
    result = stream.result
    print(f"  {result.status}: {result.output}")
    return result


async def main() -> None:
    model = coach()
    flow = coaching_flow(
        models={"default": model, "analyst": model, "plan": model},
        store=MemoryStore(),
        approver=reviewer,
        ids=lambda: "coach-1",
    )
    print(f"user: {GOAL}")
    await turn(flow.stream(GOAL))
    for message in (
        "Recovery is rough, and I sleep about six hours. I'd rather not get hurt again.",
        "43, 70 km a week, 5 days; a stress fracture two years ago.",
        "Looks great!",
    ):
        print(f"user: {message}")
        result = await turn(flow.stream_resume("coach-1", message=message))
    safety = result.data["safety"]
    print(f"safety: {safety['status']}, flags: {[f['rule'] for f in safety['flags']]}")
    print(f"contraindications: {safety['contraindications']}")
    print(f"goal: {result.data['goal']}")


if __name__ == "__main__":
    asyncio.run(main())
