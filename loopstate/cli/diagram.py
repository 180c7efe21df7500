"""`loopstate diagram`: draw a machine (or a stored run on its machine) as Mermaid, DOT or SVG.

The drawing code (`engine/diagram/`, python-statemachine's diagram extractor) is imported when
a diagram is drawn: every command builds this parser, and most never draw."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from loopstate.cli.errors import report
from loopstate.cli.lookup import importable_working_directory, resolve_run
from loopstate.cli.stores import DB_HELP, add_db_option, close_store, db_of, open_store
from loopstate.engine.errors import DefinitionError, LoopstateError
from loopstate.machines import machine_class


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagram",
        help="draw a machine, or a stored run on its machine",
        description="TARGET is a shipped machine's name (agent, ...) or module:Class.",
    )
    parser.add_argument("target", nargs="?", help="machine name or module:Class")
    parser.add_argument("--format", choices=["mermaid", "dot", "svg", "png"], default="mermaid")
    parser.add_argument("--run", help="draw this stored run on its machine")
    add_db_option(parser, help=f"for --run: {DB_HELP}, or temporal://HOST:PORT[/NS]")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    parser.add_argument("--all", metavar="DIR", help="regenerate Mermaid and SVG of every machine")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    code = _main(args)
    if args.run and db_of(args).startswith("temporal://"):
        # temporalio's Rust threads can abort the interpreter as it finalizes (sdk-python#300;
        # seen here under load): as `loopstate temporal`, a command that has said all ends now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(args: argparse.Namespace) -> int:
    try:
        if args.all:
            for path in write_all(Path(args.all)):
                print(f"wrote {path}")
            return 0
        data = draw(args)
        if args.output:
            Path(args.output).write_bytes(data)
        else:
            sys.stdout.buffer.write(data)
    except LoopstateError as exc:
        return report("diagram", exc)
    except OSError as exc:  # -o or --all names a place that cannot be written
        return report("diagram", LoopstateError(_unwritable(exc)))
    return 0


def _unwritable(exc: OSError) -> str:
    where = f"{exc.filename}" if exc.filename is not None else "the output"
    return f"cannot write {where}: {exc.strerror or exc}; give a writable file (-o) or directory"


def draw(args: argparse.Namespace) -> bytes:
    from loopstate.engine.diagram import graph_of, render, run_overlay, to_dot, to_mermaid

    state = None
    target = args.target
    if args.run:
        state = asyncio.run(_load(db_of(args), args.run))
        if target and target != state.machine and target in _shipped():
            own = _drawable(state.machine, state.run_id, args.run)
            raise DefinitionError(
                f"run {state.run_id} ran on the {state.machine} machine, not {target}: "
                f"draw it with `loopstate diagram {own} --run {args.run}`"
            )
        target = target or _drawable(state.machine, state.run_id, args.run)
    if not target:
        raise DefinitionError("name a machine (e.g. agent) or pass --run")
    graph = graph_of(_machine(target))
    overlay = run_overlay(state, graph) if state is not None else None
    if args.format == "mermaid":
        return to_mermaid(graph, overlay).encode()
    dot = to_dot(graph, overlay)
    return dot.encode() if args.format == "dot" else render(dot, args.format)


def write_all(directory: Path) -> list[Path]:
    from loopstate.engine.diagram import graph_of, render, to_dot, to_mermaid
    from loopstate.machines import SHIPPED

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, machine in sorted(SHIPPED.items()):
        graph = graph_of(machine)
        for suffix, data in (
            ("mmd", to_mermaid(graph).encode()),
            ("svg", render(to_dot(graph), "svg")),
        ):
            path = directory / f"{name}.{suffix}"
            path.write_bytes(data)
            written.append(path)
    return written


def _drawable(machine: str, run_id: str, given: str) -> str:
    """The target that draws a run on `machine`: its name if loopstate ships it; a user's
    flow's machine is not known by name, so say how to name it."""
    if machine in _shipped():
        return machine
    raise DefinitionError(
        f"run {run_id} ran on the machine of your flow {machine!r}, which loopstate does not "
        f"know by name: draw it with `loopstate diagram MODULE:ATTR --run {given}`, naming "
        "the Flow (as `resume --agent` does) or its FlowMachine class"
    )


def _machine(target: str) -> Any:
    """The machine class `target` names: a shipped machine, or `module:attr` found from the
    working directory (as `--agent`): a machine class, or an Agent or Flow, drawn on its own."""
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

    importable_working_directory()
    found = machine_class(target)
    if isinstance(found, Flow):
        return found.machine
    return machine_class("agent") if isinstance(found, Agent) else found


def _shipped() -> set[str]:
    from loopstate.machines import SHIPPED

    return set(SHIPPED)  # the names only: no machine is imported


async def _load(db: str, run_id: str) -> Any:
    if db.startswith("temporal://"):  # a run on Temporal: its state by Query
        from loopstate.temporal.client import load_state

        return await load_state(db, run_id)
    store = open_store(db, must_exist=True)
    try:
        return await store.load(await resolve_run(store, run_id))
    finally:
        await close_store(store)
