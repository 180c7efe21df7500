"""`loopstate runs list|show`, `approve`, `deny`, `edit`, `abort`, `resume`: stored runs."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from loopstate.cli.stores import DB_HELP, DEFAULT_DB, close_store, open_store
from loopstate.cli.text import shown, shown_json
from loopstate.engine.approval import as_decision
from loopstate.engine.errors import DefinitionError, LoopstateError
from loopstate.engine.result import RunResult
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.engine.stores.sqlite import DEFAULT_BUSY_TIMEOUT_S

Command = Callable[[argparse.Namespace, Store], Coroutine[Any, Any, int]]


def register(subparsers: Any) -> None:
    runs = subparsers.add_parser("runs", help="list and inspect stored runs")
    which = runs.add_subparsers(dest="runs_command", required=True, metavar="SUBCOMMAND")
    listing = _command(which, "list", _list, help="runs, most recently updated first")
    listing.add_argument("--status", help="only runs with this status (e.g. awaiting_approval)")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    show = _command(which, "show", _show, help="one run: state, transitions, pending calls")
    show.add_argument("run")
    show.add_argument("--json", action="store_true", help="machine-readable output")

    for name, helptext in (
        ("approve", "approve a pending call"),
        ("deny", "deny a pending call; the model sees the reason"),
        ("edit", "run a pending call with other arguments"),
    ):
        parser = _command(subparsers, name, _decide, help=helptext)
        parser.add_argument("run")
        parser.add_argument("call")
        parser.add_argument("--actor", default=f"cli:{_user()}", help="who decides (audit)")
        if name == "deny":
            parser.add_argument("--reason", required=True)
        if name == "edit":
            parser.add_argument("--args", required=True, help="the new arguments, a JSON object")
    abort = _command(subparsers, "abort", _abort, help="end a suspended run: no further step")
    abort.add_argument("run")
    abort.add_argument("--reason", required=True)
    abort.add_argument("--actor", default=f"cli:{_user()}")
    resume = _command(
        subparsers, "resume", _resume, help="continue a run with its recorded decisions"
    )
    resume.add_argument("run")
    resume.add_argument(
        "--agent",
        required=True,
        help="module:attr of the Agent or Flow (or a function returning one)",
    )
    resume.add_argument(
        "--message",
        help="the user's next message: continues a run that answered or a flow waiting "
        "for input, or accompanies the recorded decisions",
    )


def _command(subparsers: Any, name: str, run: Command, **kwargs: Any) -> Any:
    parser = subparsers.add_parser(name, **kwargs)
    parser.add_argument("--db", default=DEFAULT_DB, help=DB_HELP)
    parser.add_argument(
        "--busy-timeout",
        type=float,
        default=DEFAULT_BUSY_TIMEOUT_S,
        metavar="SECONDS",
        help="how long to wait for another process holding a SQLite store (%(default)s)",
    )
    parser.set_defaults(func=lambda args: _main(run, args))
    return parser


def _main(run: Command, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_with_store(run, args))
    except LoopstateError as exc:
        print(shown(f"loopstate {args.command}: {exc}"), file=sys.stderr)
        return 2


async def _with_store(run: Command, args: argparse.Namespace) -> int:
    store = open_store(args.db, busy_timeout=args.busy_timeout)
    try:
        return await run(args, store)
    finally:
        await close_store(store)


async def _list(args: argparse.Namespace, store: Store) -> int:
    runs = await store.list_runs(status=args.status)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return 0
    if not runs:
        print("no runs")
    for r in runs:
        pending = f"  {r.pending} pending" if r.pending else ""
        print(shown(f"{r.run_id}  {r.status:<17} {r.state:<17} steps {r.steps}{pending}"))
    return 0


async def _show(args: argparse.Namespace, store: Store) -> int:
    state = await store.load(args.run)
    if args.json:
        print(json.dumps(_summary(state), indent=2))
        return 0
    s = _summary(state)
    print(shown(f"run {state.run_id} ({state.machine}): {state.status}, state {state.state}"))
    if state.stop_reason or state.error:
        print(shown(f"  stop reason: {state.stop_reason}  error: {state.error}"))
    print(shown(f"  history: {s['history']}; steps {state.steps}; usage {s['usage']}"))
    print("transitions:")
    for t in state.transitions:
        who = f" by {t.actor}" if t.actor else ""
        why = f" ({t.reason})" if t.reason else ""
        print(shown(f"  {t.seq:>3} {t.source} → {t.target} [{t.event}]{who}{why}"))
    if state.pending:
        print("pending approvals:")
        queued = {q.call_id: q for q in state.inbox}
        for p in state.pending:
            mark = f"  (decided: {queued[p.call_id].decision.kind})" if p.call_id in queued else ""
            print(shown(f"  {p.call_id}  {p.tool} {shown_json(p.arguments)}{mark}"))
    if state.output:
        print(shown(f"output: {state.output}"))
    return 0


def _summary(state: RunState) -> dict[str, Any]:
    return {
        "run_id": state.run_id,
        "machine": state.machine,
        "status": state.status,
        "state": state.state,
        "steps": state.steps,
        "stop_reason": state.stop_reason,
        "error": state.error,
        "output": state.output,
        "usage": state.usage.model_dump(),
        "history": dict(Counter(m.role for m in state.messages)),
        "transitions": [t.model_dump(mode="json") for t in state.transitions],
        "pending": [p.model_dump(mode="json") for p in state.pending],
        "queued_decisions": [q.model_dump(mode="json") for q in state.inbox],
    }


async def _decide(args: argparse.Namespace, store: Store) -> int:
    from loopstate.engine.operations import queue_decision

    form: dict[str, Any] = {"kind": args.command}  # approve, deny or edit
    if args.command == "deny":
        form["reason"] = args.reason
    if args.command == "edit":
        form["arguments"] = _json_object(args.args)
    decision = as_decision(form)  # the one parser of decisions: an edit is checked here
    await queue_decision(store, args.run, args.call, decision, actor=args.actor)
    print(shown(f"{args.command} recorded for {args.call} of run {args.run}; it applies at resume"))
    return 0


async def _abort(args: argparse.Namespace, store: Store) -> int:
    from loopstate.engine.operations import abort_run

    result = await abort_run(store, args.run, args.reason, actor=args.actor)
    print(shown(f"run {result.run_id}: {result.status} ({result.stop_reason})"))
    return 0


async def _resume(args: argparse.Namespace, store: Store) -> int:
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

    target: Agent | Flow = load_agent(args.agent).clone(store=store)
    actor = f"cli:{_user()}"
    result = await target.resume(args.run, message=args.message, actor=actor)
    _print_result(result)
    return 0 if result.status != "failed" else 1


def _print_result(result: RunResult) -> None:
    for t in result.transitions:
        print(shown(f"  [{t.seq:>2}] {t.source} → {t.target}"))
    print(
        shown(f"status: {result.status}   stop reason: {result.stop_reason}   run: {result.run_id}")
    )
    for p in result.pending:
        print(shown(f"  pending: {p.call_id} {p.tool} {shown_json(p.arguments)}"))
    if result.output:
        print(shown(f"answer: {result.output}"))


def load_agent(spec: str) -> Any:
    """The Agent or Flow at module:attr (or returned by the function there)."""
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise DefinitionError(f"--agent takes module:attr, not {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise DefinitionError(f"cannot load the agent {spec}: {exc}") from None
    agent = target() if callable(target) and not isinstance(target, Agent | Flow) else target
    if not isinstance(agent, Agent | Flow):
        raise DefinitionError(f"{spec} is not an Agent or a Flow (nor a function returning one)")
    return agent


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise DefinitionError(
            f"--args is not valid JSON: {exc.msg} at position {exc.pos}"
        ) from None
    except RecursionError:
        raise DefinitionError("--args is nested too deeply; give flatter arguments") from None
    if not isinstance(value, dict):
        raise DefinitionError("--args must be a JSON object")
    return value


def _not_json(name: str) -> Any:
    raise DefinitionError(f"--args holds {name}, which is not JSON; give a finite number")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
