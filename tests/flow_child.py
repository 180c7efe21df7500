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
    "goal_summary": "a 4:25 1500m",
    "fields": [
        {
            "name": "age",
            "question": "How old are you?",
            "reason": "recovery capacity",
            "priority": "required",
            "validation": {"kind": "number", "min": 13, "max": 100},
        },
        {
            "name": "weekly_km",
            "question": "How many km a week do you run?",
            "reason": "safe progression",
            "priority": "required",
            "validation": {"kind": "number", "min": 0},
        },
        {
            "name": "injury_history",
            "question": "Any injuries?",
            "reason": "contraindications",
            "priority": "required",
        },
        {
            "name": "track_access",
            "question": "Track access?",
            "reason": "workout venue",
            "priority": "optional",
        },
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


def answers(age: Any = 43, km: Any = 40, injuries: str = "none") -> Turn:
    return calls(
        call("collect_data", {"field": "age", "value": age}),
        call("collect_data", {"field": "weekly_km", "value": km}),
        call("collect_data", {"field": "injury_history", "value": injuries}),
    )


def happy_script() -> list[Any]:
    """One model for every phase, turn by step: the conversation of the happy path."""
    return [
        call("set_goal", {"goal": "run a 4:25 1500m"}),  # goal_capture
        call("submit_intake_schema", SCHEMA),  # analyst
        text("How old are you, how far do you run a week, and any injuries?"),  # intake
        answers(),
        text("Thanks, that is everything."),
        call("generate_plan", PLAN),  # plan (needs approval)
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
