"""Scripts for the coaching-flow tests, and a child process that runs or resumes one coaching
run against a shared SQLite file (so a conversation can continue in another process).

usage: python flow_child.py DB (run MESSAGE | reply MESSAGE | approve) [--at SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from loopstate import Approve, ScriptedModel
from loopstate.engine.models.scripted import Turn, call, calls, text
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.machines.coaching import coaching_flow

SCHEMA: dict[str, Any] = {
    "goal_analysis": {
        "goal_type": "performance",
        "sport": "running",
        "event": "1500m",
        "target_metric": "4:25",
    },
    "fields": [
        {
            "field_name": "age",
            "question": "How old are you?",
            "reason": "recovery capacity",
            "priority": "required",
            "validation": {"kind": "number", "min": 13, "max": 100},
        },
        {
            "field_name": "weekly_volume",
            "question": "What's your current weekly running volume (km)?",
            "reason": "safe progression",
            "priority": "required",
            "validation": {"kind": "number", "min": 0},
        },
        {
            "field_name": "injury_history",
            "question": "Any current injuries or recurring issues?",
            "reason": "contraindications",
            "priority": "required",
        },
        {
            "field_name": "training_days",
            "question": "How many days per week can you train?",
            "reason": "plan structure",
            "priority": "required",
            "validation": {"kind": "number", "min": 1, "max": 7},
        },
        {
            "field_name": "track_access",
            "question": "Track access?",
            "reason": "workout venue",
            "user_facing_reason": "it changes how intervals are set",
            "priority": "optional",
        },
    ],
    "safety_flags": [
        {"condition": "injury_history contains 'stress fracture'", "action": "require_review"}
    ],
}

PLAN: dict[str, Any] = {
    "title": "Speed base",
    "weeks": 8,
    "sessions": [
        {"day": "tue", "kind": "intervals", "minutes": 50, "description": "6x400m"},
        {"day": "sat", "kind": "long run", "minutes": 70, "description": "easy"},
    ],
}

ANSWERS = "43, 70 km a week, 5 days, a stress fracture last year"
"""What the user says in the happy path: the seed's flagged athlete."""


def answers(
    age: Any = 43, volume: Any = 70, injuries: str = "stress fracture last year", days: Any = 5
) -> Turn:
    return calls(
        call("collect_data", {"field": "age", "value": age}),
        call("collect_data", {"field": "weekly_volume", "value": volume}),
        call("collect_data", {"field": "injury_history", "value": injuries}),
        call("collect_data", {"field": "training_days", "value": days}),
    )


def happy_script() -> list[Any]:
    """One model for every phase, turn by step: the conversation of the happy path (the
    safety rules flag the athlete, so the plan waits for a person's approval)."""
    return [
        call("set_goal", {"goal": "run a 4:25 1500m"}),  # goal_capture
        call("submit_intake_schema", SCHEMA),  # analyst
        text("How old are you, how far do you run a week, how many days, and any injuries?"),
        answers(),  # intake
        text("Thanks, that is everything."),
        call("generate_plan", PLAN),  # plan (flagged: needs approval)
        text("Here is your 8-week plan."),  # present
        call("respond_to_plan", {"decision": "accept"}),
    ]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    model = ScriptedModel(happy_script(), by_step=True)
    flow = coaching_flow(
        models={phase: model for phase in ("default", "analyst", "plan")},
        store=SQLiteStore(args.db),
        ids=lambda: "coach-1",
        clock=lambda: args.at,
    )
    if args.mode == "run":
        result = await flow.run(args.message)
    elif args.mode == "reply":
        result = await flow.resume("coach-1", message=args.message)
    else:
        pending = (await flow.store.load("coach-1")).pending
        result = await flow.resume("coach-1", decisions={p.call_id: Approve() for p in pending})
    return {
        "status": result.status,
        "phase": result.phase,
        "output": result.output,
        "pending": [p.tool for p in result.pending],
        "data": result.data,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("mode", choices=["run", "reply", "approve"])
    parser.add_argument("message", nargs="?", default="")
    parser.add_argument("--at", type=float, default=1_000.0)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
