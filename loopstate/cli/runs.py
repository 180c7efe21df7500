"""`loopstate runs list|show|pending|fork`, `approve`, `deny`, `edit`, `abort`, `resume`: runs.

A run is named by its id or any unique prefix of it; the store by `--db` (before or after the
command), `LOOPSTATE_DB`, or the nearest project's `.loopstate/runs.db`. These commands read an
existing store: none of them creates one.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from loopstate.cli.errors import interrupted, report
from loopstate.cli.limits import budget_of
from loopstate.cli.lookup import load_agent, resolve_run
from loopstate.cli.runs_check import register_check
from loopstate.cli.runs_fork import register_fork
from loopstate.cli.runs_listing import Listed, damaged_json, damaged_line, read_listed
from loopstate.cli.runs_tree import pending_lines, soonest_due, tree_lines
from loopstate.cli.runs_view import next_step, show_json, show_lines, table, wants_message
from loopstate.cli.standing import (
    add_always_options,
    register_forget,
    remember_form,
    remembered_lines,
)
from loopstate.cli.stores import add_db_option, close_store, db_of, open_store
from loopstate.cli.text import shown, shown_json
from loopstate.engine.approval import as_decision
from loopstate.engine.errors import DefinitionError, LoopstateError, RunNotResumable
from loopstate.engine.result import RunResult
from loopstate.engine.state import RunState
from loopstate.engine.store import RunSummary, Store
from loopstate.engine.stores.sqlite import DEFAULT_BUSY_TIMEOUT_S
from loopstate.engine.sync import run_interruptible
from loopstate.engine.tree import run_tree, tree_pending

__all__ = ["load_agent", "register"]

_EVERY = 1_000_000
Command = Callable[[argparse.Namespace, Store], Coroutine[Any, Any, int]]


def register(subparsers: Any) -> None:
    runs = subparsers.add_parser("runs", help="list and inspect stored runs")
    which = runs.add_subparsers(dest="runs_command", required=True, metavar="SUBCOMMAND")
    listing = _command(which, "list", _list, help="runs, most recently updated first")
    listing.add_argument("--status", help="only runs with this status (e.g. awaiting_approval)")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (%(default)s)")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    show = _command(which, "show", _show, help="one run: conversation, tool calls, transitions")
    show.add_argument("run", help="a run id, or a unique start of one")
    show.add_argument("--json", action="store_true", help="the whole stored run, as JSON")
    pending = _command(
        which, "pending", _pending, help="calls waiting for a decision, sub-agents' included"
    )
    pending.add_argument("run", nargs="?", help="only this run (default: every waiting run)")
    register_fork(_command, which, _user())
    register_check(_command, which)

    for name, helptext in (
        ("approve", "approve a pending call (or --all of them)"),
        ("deny", "deny a pending call (or --all); the model sees the reason"),
        ("edit", "run a pending call with other arguments"),
    ):
        parser = _command(subparsers, name, _decide, help=helptext)
        parser.add_argument("run", help="a run id, or a unique start of one")
        parser.add_argument("call", nargs="?" if name != "edit" else None, help="the call id")
        if name != "edit":
            parser.add_argument("--all", action="store_true", help="every pending call")
        parser.add_argument("--actor", default=f"cli:{_user()}", help="who decides (audit)")
        if name == "deny":
            parser.add_argument("--reason", required=True, help="why (audited; the model sees it)")
            parser.add_argument("--message", help="the exact text the model sees instead")
        if name != "edit":
            add_always_options(parser)
        if name == "edit":
            parser.add_argument("--args", required=True, help="the new arguments, a JSON object")
    result = _command(
        subparsers, "result", _decide, help="supply the result of an external tool's call"
    )
    result.add_argument("run", help="a run id, or a unique start of one")
    result.add_argument("call", help="the call id")
    result.add_argument("--value", required=True, help="the result, as JSON")
    result.add_argument("--actor", default=f"cli:{_user()}", help="who supplies it (audit)")
    register_forget(_command, subparsers, _user())
    pause = _command(subparsers, "pause", _pause, help="stop a running run at its next step")
    pause.add_argument("run", help="a run id, or a unique start of one")
    pause.add_argument("--actor", default=f"cli:{_user()}")
    abort = _command(subparsers, "abort", _abort, help="end a suspended run: no further step")
    abort.add_argument("run", help="a run id, or a unique start of one")
    abort.add_argument("--reason", required=True)
    abort.add_argument("--actor", default=f"cli:{_user()}")
    resume = _command(
        subparsers, "resume", _resume, help="continue a run with its recorded decisions"
    )
    resume.add_argument("run", help="a run id, or a unique start of one")
    resume.add_argument(
        "--agent",
        required=True,
        help="module:attr of the Agent or Flow (or a function returning one); "
        "modules in the working directory are found",
    )
    resume.add_argument(
        "--message",
        help="the user's next message: continues a run that answered or a flow waiting "
        "for input, or accompanies the recorded decisions",
    )
    resume.add_argument(
        "--budget",
        action="append",
        metavar="LIMIT=VALUE",
        help="raise a limit of the run's budget (tokens, cost_usd, tool_calls, model_calls, "
        "wall_s), e.g. cost_usd=2; repeat for several",
    )


def _command(subparsers: Any, name: str, run: Command, **kwargs: Any) -> Any:
    parser = subparsers.add_parser(name, **kwargs)
    add_db_option(parser)
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
        return run_interruptible(_with_store(run, args))
    except LoopstateError as exc:
        return report(args.command, exc)
    except KeyboardInterrupt as exc:
        if args.command != "resume":
            raise
        return interrupted(args.run, exc, agent=args.agent)


async def _with_store(run: Command, args: argparse.Namespace) -> int:
    store = open_store(db_of(args), busy_timeout=args.busy_timeout, must_exist=True)
    try:
        if getattr(args, "run", None) is not None:
            args.run = await resolve_run(store, args.run)
        return await run(args, store)
    finally:
        await close_store(store)


async def _list(args: argparse.Namespace, store: Store) -> int:
    runs = await store.list_runs(status=args.status, limit=args.limit)
    states = await read_listed(store, runs)
    if args.json:
        print(json.dumps([_listed(s) for s in states], indent=2, ensure_ascii=False))
        return 0
    if not states:
        where = f" with status {args.status}" if args.status else ""
        print(f"no runs{where}", file=sys.stderr)
        return 0
    print("\n".join(table(states)))
    return 0


def _listed(state: Listed) -> dict[str, Any]:
    if isinstance(state, RunSummary):
        return damaged_json(state)
    return {
        "run_id": state.run_id,
        "machine": state.machine,
        "status": state.status,
        "state": state.state,
        "steps": state.steps,
        "pending": len(state.pending),
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "stop_reason": state.stop_reason,
        "prompt": next((m.content for m in state.messages if m.role == "user"), None),
    }


async def _show(args: argparse.Namespace, store: Store) -> int:
    tree = await run_tree(store, args.run)
    if args.json:
        print(show_json(tree.state))
    elif not tree.children:
        print("\n".join(show_lines(tree.state)))
    else:
        lines = show_lines(tree.state, pending=False)
        print("\n".join([*lines, *tree_lines(tree), *pending_lines(tree)]))
    if not args.json and (standing := remembered_lines(tree.state)):
        print("\n".join(shown(line) for line in standing))
    return 0


async def _pending(args: argparse.Namespace, store: Store) -> int:
    if args.run is not None:
        runs = [args.run]
    else:
        listed = await read_listed(
            store, await store.list_runs(status="awaiting_approval", limit=_EVERY)
        )
        for damaged in (r for r in listed if isinstance(r, RunSummary)):
            print(shown(f"loopstate runs pending: {damaged_line(damaged)}"), file=sys.stderr)
        runs = [r.run_id for r in listed if isinstance(r, RunState) and r.parent is None]
    trees = sorted([await run_tree(store, run_id) for run_id in runs], key=soonest_due)
    lines = [line for tree in trees for line in pending_lines(tree)]
    print("\n".join(lines).strip() if lines else "no call waits for a decision")
    return 0


async def _decide(args: argparse.Namespace, store: Store) -> int:
    from loopstate.engine.operations import queue_decision

    form: dict[str, Any] = {"kind": args.command}  # approve, deny or edit
    if args.command == "deny":
        form.update(reason=args.reason, message=args.message)
    if args.command in ("approve", "deny"):
        form["remember"] = remember_form(args)
    if args.command == "edit":
        form["arguments"] = _json_object(args.args)
    if args.command == "result":
        form["value"] = _json_value(args.value)
    decision = as_decision(form)  # the one parser of decisions: an edit is checked here
    for run_id, call in await _calls(args, store):
        queued = await queue_decision(store, run_id, call, decision, actor=args.actor)
        print(
            shown(f"{args.command} recorded for {call} of run {queued.run_id}; applies at resume")
        )
    if isinstance(remember := form.get("remember"), dict):
        print(shown(f"remembered as rule {remember['name']!r} for later calls it matches"))
    print(f"continue the run with: loopstate resume {args.run} --agent MODULE:ATTR")
    return 0


async def _calls(args: argparse.Namespace, store: Store) -> list[tuple[str, str]]:
    """The call the command names, or with `--all` every call still waiting (in the run and
    in its sub-agents' runs), each with its run."""
    every = getattr(args, "all", False)
    if every == (args.call is not None):
        raise DefinitionError(f"{args.command} takes a CALL or --all (one of the two)")
    if args.call is not None:
        return [(args.run, str(args.call))]
    tree = await run_tree(store, args.run)
    queued = {(n.state.run_id, q.call_id) for n in tree.walk() for q in n.state.inbox}
    calls = [(p.run_id or args.run, p.call_id) for p in tree_pending(tree)]
    calls = [c for c in calls if c not in queued]
    if not calls:
        raise DefinitionError(f"run {args.run} has no call waiting for a decision")
    return calls


async def _abort(args: argparse.Namespace, store: Store) -> int:
    from loopstate.engine.operations import abort_run

    result = await abort_run(store, args.run, args.reason, actor=args.actor)
    print(shown(f"run {result.run_id}: {result.status} ({result.stop_reason})"))
    return 0


async def _pause(args: argparse.Namespace, store: Store) -> int:
    from loopstate.engine.pause import pause_run

    if await pause_run(store, args.run, actor=args.actor):
        print(shown(f"run {args.run}: pause asked; it stops at its next step (then resume it)"))
    else:
        status = (await store.load(args.run)).status
        print(shown(f"run {args.run} is {status}, not running: it stays as it is"))
    return 0


async def _resume(args: argparse.Namespace, store: Store) -> int:
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

    target: Agent | Flow = load_agent(args.agent).clone(store=store)
    if args.message is None and (why := wants_message(await store.load(args.run), args.agent)):
        raise RunNotResumable(why)
    actor = f"cli:{_user()}"
    budget = budget_of(args.budget) if args.budget else None
    result = await target.resume(args.run, message=args.message, actor=actor, budget=budget)
    _print_result(result)
    state = result.transitions[-1].target if result.transitions else ""
    for line in next_step(result.run_id, state, args.agent, result.failure):
        print(shown(line))
    return 0 if result.status != "failed" else 1


def _print_result(result: RunResult) -> None:
    for t in result.transitions:
        print(shown(f"  [{t.seq:>2}] {t.source} → {t.target}"))
    print(shown(f"status: {result.status}   run: {result.run_id}"))
    if result.stop_reason:
        print(shown(f"stop reason: {result.stop_reason}"))
    if result.failure is not None:
        print(shown(f"failed: {result.failure.error}"))
    for p in result.pending:
        print(shown(f"  pending: {p.call_id} {p.tool} {shown_json(p.arguments)}"))
    if result.output:
        print(shown(f"answer: {result.output}"))


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


def _json_value(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise DefinitionError(
            f"--value is not valid JSON: {exc.msg} at position {exc.pos}"
        ) from None
    except RecursionError:
        raise DefinitionError("--value is nested too deeply") from None


def _not_json(name: str) -> Any:
    raise DefinitionError(f"--args holds {name}, which is not JSON; give a finite number")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
