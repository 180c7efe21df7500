"""Standing decisions on the command line: `approve|deny --always` (for the call's tool, or
with `--pattern`/`--category`/`--tools` for the calls a rule matches), `loopstate forget`
(revoke one, recorded with who and why), and how `runs show` lists them."""

from __future__ import annotations

import argparse
from typing import Any

from loopstate.cli.runs_view import ago
from loopstate.engine.errors import DefinitionError
from loopstate.engine.state import Remembered, RunState
from loopstate.engine.store import Store

_SELECTORS = ("pattern", "category", "tools")


def add_always_options(parser: argparse.ArgumentParser) -> None:
    """`--always` and the rule it may remember, for `approve` and `deny`."""
    parser.add_argument(
        "--always",
        action="store_true",
        help="decide the same way for this run's later calls of the tool (revoke: forget)",
    )
    parser.add_argument("--pattern", help="with --always: for calls whose tool matches (db_*)")
    parser.add_argument("--category", help="with --always: for calls of tools in this category")
    parser.add_argument("--tools", help="with --always: for calls of these tools (a,b)")
    parser.add_argument("--rule", help="with --always: the rule's name (default: what it selects)")


def remember_form(args: argparse.Namespace) -> bool | dict[str, Any]:
    """What `--always` asks to remember: nothing, the call's tool, or a rule (dict form)."""
    given = {k: getattr(args, k) for k in (*_SELECTORS, "rule") if getattr(args, k)}
    if not args.always:
        if given:
            raise DefinitionError(f"--{next(iter(given))} needs --always")
        return False
    selection = {k: v for k, v in given.items() if k in _SELECTORS}
    if not selection:
        if "rule" in given:
            raise DefinitionError("--rule needs --pattern, --category or --tools")
        return True
    name = given.get("rule") or " ".join(f"{k}={v}" for k, v in selection.items())
    if "tools" in selection:
        selection["tools"] = [t.strip() for t in selection["tools"].split(",") if t.strip()]
    rule: dict[str, Any] = {"name": name, "decision": args.command, **selection}
    if args.command == "deny":
        rule.update(reason=args.reason, message=args.message)
    return rule


def register_forget(command: Any, subparsers: Any, user: str) -> None:
    """`loopstate forget RUN TOOL | --rule NAME`, built with the runs commands' `command`."""
    forget = command(
        subparsers, "forget", _forget, help="revoke a remembered decision (--always) of a run"
    )
    forget.add_argument("run", help="a run id, or a unique start of one")
    forget.add_argument("tool", nargs="?", help="the tool whose remembered decision to revoke")
    forget.add_argument("--rule", help="the remembered rule to revoke, by name")
    forget.add_argument("--reason", default="", help="why (kept with the revocation)")
    forget.add_argument("--actor", default=f"cli:{user}", help="who revokes it (audit)")


async def _forget(args: argparse.Namespace, store: Store) -> int:
    from loopstate.cli.text import shown
    from loopstate.engine.operations import forget_decision

    if (args.tool is None) == (args.rule is None):
        raise DefinitionError("forget takes a TOOL or --rule NAME (one of the two)")
    state = await forget_decision(
        store, args.run, args.tool, rule=args.rule, actor=args.actor, reason=args.reason
    )
    subject = args.tool if args.rule is None else f"rule {args.rule}"
    given = [r.by for r in state.remembered if r.subject == subject and r.revoked is not None]
    print(shown(f"revoked the remembered decision for {subject} (given by {given[-1]})"))
    print("its later calls wait for a decision again")
    return 0


def remembered_lines(state: RunState) -> list[str]:
    """The `runs show` section listing the run's standing decisions, revoked ones marked."""
    if not state.remembered:
        return []
    return ["", "remembered decisions:", *(_line(r) for r in state.remembered)]


def _line(r: Remembered) -> str:
    what = r.subject
    if r.rule is not None:
        chosen = {k: getattr(r.rule, k) for k in _SELECTORS if getattr(r.rule, k)}
        what += " (" + ", ".join(f"{k} {v}" for k, v in chosen.items()) + ")"
    line = f"  {r.decision:<7}  {what}  given by {r.by} {ago(r.at)} ago"
    if r.revoked is not None:
        why = f": {r.revoked.reason}" if r.revoked.reason else ""
        line += f"; revoked by {r.revoked.by} {ago(r.revoked.at)} ago{why}"
    return line
