"""`loopstate demo`: the scripted coding agent, asking for approval in this terminal."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from loopstate.cli.errors import interrupted, report
from loopstate.cli.hint import command_prefix
from loopstate.cli.text import shown
from loopstate.engine.approval import Abort, ApprovalRequest, Approve, Decision, Deny, Edit
from loopstate.engine.clock import random_ids
from loopstate.engine.errors import LoopstateError
from loopstate.engine.hooks import Hooks
from loopstate.engine.state import CallRecord, Transition
from loopstate.engine.sync import run_interruptible
from loopstate.engine.tool import Tool

Ask = Callable[[str], str]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the offline demo: a scripted coding agent with real tools",
        description="A coding agent fixes a typo in a temporary workspace. The model's words "
        "are scripted (no key, no network); the tools and approvals are real.",
    )
    parser.add_argument("--yes", action="store_true", help="approve every gated call")
    parser.add_argument(
        "--model", help="run a real model through litellm instead (e.g. openai/gpt-4o-mini)"
    )
    parser.add_argument(
        "--suspend",
        action="store_true",
        help="ask nobody: suspend at the first gated call, to decide from another terminal",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="leave the run waiting and serve the approval inbox (needs loopstate[service])",
    )
    parser.add_argument("--port", type=int, default=8000, help="for --serve (%(default)s)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.serve:
        from loopstate.cli.serve import serve_demo

        served: int = serve_demo(args.port)
        return served
    run_id = random_ids()
    try:
        return run_interruptible(_demo(args, ask=input, run_id=run_id))
    except LoopstateError as exc:  # the store cannot be used, the model not reached, ...
        return report("demo", exc)
    except KeyboardInterrupt as exc:  # mid-run (at the prompt, Ctrl-C aborts the run)
        if args.suspend:
            return interrupted(run_id, exc, agent="loopstate.demo:suspended_agent")
        print(f"\ninterrupted (run {run_id}); the demo's workspace is gone", file=sys.stderr)
        return 130


async def _demo(args: argparse.Namespace, *, ask: Ask, run_id: str) -> int:
    from loopstate import demo

    if args.suspend:
        demo.seed_workspace(demo.suspend_workspace())
        agent = demo.suspended_agent().clone(hooks=Narrator())
        if args.model:
            agent = agent.clone(model=args.model)
        result = await agent.run(demo.TASK, run_id=run_id)
        return _report(result, suspended_hint=True, store=agent.store)
    with tempfile.TemporaryDirectory(prefix="loopstate-demo-") as tmp:
        workspace = demo.seed_workspace(Path(tmp))
        print(f"workspace: {workspace}")
        agent = demo.build_agent(workspace, model=args.model, hooks=Narrator())
        approver = approve_everything if args.yes else terminal_approver(ask, agent.tools)
        result = await agent.clone(approver=approver).run(demo.TASK, run_id=run_id)
        print(shown(f"notes.md now reads: {(workspace / 'notes.md').read_text()!r}"))
        return _report(result)


def _report(result: Any, *, suspended_hint: bool = False, store: Any = None) -> int:
    print()
    print(shown(f"status: {result.status}   run: {result.run_id}"))
    if result.stop_reason:
        print(shown(f"stop reason: {result.stop_reason}"))
    if result.failure is not None:
        print(shown(f"failed: {result.failure.error}"))
    if result.output:
        print(shown(f"answer: {result.output}"))
    if result.status == "awaiting_approval" and suspended_hint:
        where = getattr(store, "path", store)
        me = command_prefix()
        print()
        print(
            shown(f"The run is suspended in {where}; this process can exit. From a shell in "
                  "this directory (or any below it; elsewhere add --db PATH):")
        )  # fmt: skip
        for p in result.pending:
            print(shown(f"  {me} approve {result.run_id[:8]} {p.call_id}     # or deny/edit"))
        print(shown(f"  {me} resume {result.run_id[:8]} --agent loopstate.demo:suspended_agent"))
    return 0 if result.status in ("done", "awaiting_approval", "aborted") else 1


async def approve_everything(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
    for r in requests:
        print(shown(f"  auto-approving {r.tool}({_short(r.arguments)}) because of --yes"))
    return {r.call_id: Approve() for r in requests}


def terminal_approver(
    ask: Ask, tools: Iterable[Tool] = ()
) -> Callable[[list[ApprovalRequest]], Any]:
    """Asks in the terminal for each gated call of a step: approve, deny, edit or abort.
    An edit is checked against the tool's schema (from `tools`) and asked again if it does
    not fit; Ctrl-C or Ctrl-D at the prompt aborts the run."""
    by_name = {t.name: t for t in tools}

    async def approver(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        decisions: dict[str, Decision] = {}
        for r in requests:
            # Asked on the event loop's thread, not in a worker thread: Ctrl-C then reaches
            # the prompt (and the demo aborts the run) instead of a thread that outlives it.
            decision = _interruptible(ask, r, by_name.get(r.tool))
            decisions[r.call_id] = decision
            if isinstance(decision, Abort):
                break
        return decisions

    return approver


def _interruptible(ask: Ask, request: ApprovalRequest, tool: Tool | None) -> Decision:
    """`_ask_one` with Ctrl-C raising at the prompt (asyncio's own handler would only cancel
    the run's task, and the prompt would wait for Enter)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _ask_one(ask, request, tool)
    except KeyboardInterrupt:
        print()
        return Abort("interrupted at the prompt (Ctrl-C)")
    finally:
        signal.signal(signal.SIGINT, previous)


def _ask_one(ask: Ask, request: ApprovalRequest, tool: Tool | None = None) -> Decision:
    print()
    arguments = json.dumps(request.arguments, indent=2, ensure_ascii=False)
    # the indented JSON's own newlines stay; everything inside it is shown escaped
    print(
        shown(f"  {request.tool} wants to run with"), *map(shown, arguments.splitlines()), sep="\n"
    )
    while True:
        try:
            choice = ask("  [a]pprove, [d]eny, [e]dit arguments, a[b]ort? ").strip().lower()
            if choice in ("a", "approve", "y", "yes"):
                return Approve()
            if choice in ("d", "deny", "n", "no"):
                return Deny(ask("  reason for the model: ").strip() or "denied")
            if choice in ("e", "edit"):
                edited = _ask_json(ask)
                if edited is not None and _fits(tool, edited):
                    return Edit(edited)
            elif choice in ("b", "abort"):
                return Abort(ask("  reason: ").strip() or "aborted from the terminal")
        except EOFError:
            return Abort("no answer: the terminal closed")


def _ask_json(ask: Ask) -> dict[str, Any] | None:
    text = ask("  new arguments as JSON: ")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"  not JSON ({exc.msg}); try again")
        return None
    if not isinstance(value, dict):
        print("  arguments must be a JSON object; try again")
        return None
    return value


def _fits(tool: Tool | None, arguments: dict[str, Any]) -> bool:
    """Whether edited arguments fit the tool's schema; if not, says why."""
    if tool is None:
        return True
    try:
        tool.validate(arguments)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "arguments"
            print(shown(f"  {where}: {error['msg']}"))
        print("  the edit does not fit the tool's arguments; try again")
        return False
    return True


class Narrator(Hooks):
    """Prints each transition as it happens, and each tool's outcome."""

    async def on_transition(self, transition: Transition) -> None:
        print(shown(f"  [{transition.seq:>2}] {transition.source} → {transition.target}"))

    async def on_approval_decided(self, call: CallRecord) -> None:
        decision = call.decision
        if decision is None:
            return
        why = getattr(decision, "reason", None)
        how = {"approve": "approved", "deny": "denied", "edit": "edited", "abort": "aborted"}
        said = f" ({why})" if why else ""
        print(shown(f"       {call.tool} {how.get(decision.kind, decision.kind)}{said}"))

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        args = _short(call.executed_arguments or {})
        print(shown(f"       {call.tool}({args}) → {call.status}: {_short(result)}"))
        return None


def _short(value: object, limit: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"
