"""A child process for the durability tests: runs or resumes one agent run, and may SIGKILL
itself at a named boundary. Every model request and tool execution is appended to a log file,
so the parent can count them across processes.

usage: python durable_child.py DB WORKDIR (run|resume|abort) [--kill POINT] [--decide JSON]
                               [--lease S] [--ask-again] [--hold S] [--release FILE]
                               [--two-charges] [--from-turn N]

--decide maps call ids to `[kind, *args]` or to a Decision as JSON (to pass a `digest`).
--from-turn N gives this process a model whose script holds only turns N.. (served in order,
not by step): a repeated earlier request would get the wrong turn, and one too many raises
ScriptExhausted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from support.waiting import until

from loopstate import (
    Abort,
    Agent,
    Approve,
    CallRecord,
    Decision,
    Deny,
    Edit,
    Event,
    Hooks,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    Transition,
    tool,
)
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.stores.sqlite import SQLiteStore

parser = argparse.ArgumentParser()
parser.add_argument("db")
parser.add_argument("workdir", type=Path)
parser.add_argument("mode", choices=["run", "resume", "abort"])
parser.add_argument("--kill", default="")
parser.add_argument("--decide", default="")
parser.add_argument("--lease", type=float, default=60.0)
parser.add_argument("--ask-again", action="store_true")
parser.add_argument("--hold", type=float, default=0.0, help="seconds `charge` blocks")
parser.add_argument("--release", type=Path, help="`charge` blocks until this file exists")
parser.add_argument("--two-charges", action="store_true", help="two gated calls in turn 1")
parser.add_argument("--from-turn", type=int, default=0)
args = parser.parse_args()
LOG = args.workdir / "log.txt"


def log(line: str) -> None:
    with LOG.open("a") as f:
        f.write(line + "\n")


@tool(needs_approval=True)
async def charge(amount: int) -> str:
    """Charge a card: not idempotent."""
    log(f"tool charge {amount}")
    if args.kill == "during_tool":
        os.kill(os.getpid(), signal.SIGKILL)
    if args.hold:
        await asyncio.sleep(args.hold)
    if args.release is not None:
        await until(args.release.exists)  # the parent's signal: it has seen what it waited for
    return f"charged {amount}"


@tool(idempotent=True)
def put(key: str) -> str:
    """Store a key: idempotent."""
    log(f"tool put {key}")
    if args.kill == "during_idempotent":
        # The batch's calls run concurrently: die only once `charge` has had its effect, so
        # the kill lands mid-batch with one call done, whatever the scheduling.
        deadline = time.monotonic() + 10
        while "tool charge" not in LOG.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    return f"stored {key}"


class Counted(ScriptedModel):
    async def complete(self, request: ModelRequest) -> ModelResponse:
        log(f"model {request.step}")
        return await super().complete(request)


def last_tool_results(request: ModelRequest) -> str:
    results = [m.content for m in request.messages if m.role == "tool"]
    return f"final after: {json.dumps(results)}"


FIRST = [call("put", {"key": "k1"}), call("charge", {"amount": 5})]
SCRIPT: list[Any] = [
    calls(*FIRST, *([call("charge", {"amount": 7})] if args.two_charges else [])),
    call("put", {"key": "k2"}),
    last_tool_results,
]


class Killer(Hooks):
    """SIGKILLs this process at the boundary named by --kill."""

    def _at(self, point: str) -> None:
        if args.kill == point:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    async def before_model(self, request: ModelRequest) -> None:
        self._at(f"before_model_{request.step}")

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> None:
        self._at(f"after_model_unsaved_{request.step}")

    async def on_transition(self, transition: Transition) -> None:
        # Runs right after the save that persisted the transition.
        self._at(f"saved_{transition.source}_{transition.target}")

    async def on_approval_decided(self, call: CallRecord) -> None:
        self._at("decided_unsaved")

    async def before_tool(self, call: CallRecord) -> None:
        self._at(f"before_tool_{call.tool}")

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        self._at(f"after_tool_unsaved_{call.tool}")
        return None

    async def on_event(self, event: Event) -> None:
        if event.kind == "tool_finished":
            self._at(f"after_tool_saved_{event.tool}")


async def approver(requests: list[Any]) -> dict[str, Any]:
    if args.kill == "while_waiting":
        os.kill(os.getpid(), signal.SIGKILL)
    return {}  # decide nothing: the run suspends


def decisions() -> dict[str, Any]:
    kinds = {"approve": Approve, "deny": Deny, "edit": Edit, "abort": Abort}
    out: dict[str, Any] = {}
    for call_id, given in json.loads(args.decide or "{}").items():
        if isinstance(given, dict):
            out[call_id] = TypeAdapter(Decision).validate_python(given)
        else:
            kind, *rest = given
            out[call_id] = kinds[kind](*rest)
    return out


def model() -> Counted:
    if args.from_turn:
        return Counted(SCRIPT[args.from_turn - 1 :])
    return Counted(SCRIPT, by_step=True)


async def main() -> None:
    agent = Agent(
        model(),
        [charge, put],
        store=SQLiteStore(args.db),
        hooks=Killer(),
        approver=approver if args.kill == "while_waiting" else None,
        ids=lambda: "run-1",
        lease_s=args.lease,
        ask_again_after_crash=args.ask_again,
    )
    if args.mode == "run":
        result = await agent.run("go")
    elif args.mode == "abort":
        result = await agent.abort("run-1", "changed my mind", actor="test")
    else:
        result = await agent.resume("run-1", decisions() or None, actor="test")
    print(
        json.dumps(
            {
                "status": result.status,
                "output": result.output,
                "stop_reason": result.stop_reason,
                "pending": [p.call_id for p in result.pending],
                "requests": [p.model_dump(mode="json") for p in result.pending],
            }
        )
    )


try:
    asyncio.run(main())
except Exception as exc:  # report loopstate errors to the parent as data
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
