"""`loopstate replay CASSETTE`: replay a recorded run offline and print what it did."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from loopstate.cli.text import shown, shown_json
from loopstate.engine.errors import LoopstateError

if TYPE_CHECKING:  # imported by `main`: every command builds this parser, few replay
    from loopstate.engine.recording.cassette import Cassette


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a recorded run with no network and no side effects",
        description="Exits 1 with a divergence report if the run does not replay cleanly.",
    )
    parser.add_argument("cassette")
    parser.add_argument("--agent", help="module:attr of an Agent to check the recording against")
    parser.add_argument("--diagram", action="store_true", help="print the run on its machine")
    parser.add_argument(
        "--from-step",
        type=int,
        metavar="N",
        help="serve the first N recorded turns, then go on live with --agent's model and "
        "report where the run departs from the recording",
    )
    parser.add_argument("--json", action="store_true", help="with --from-step: the report as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from loopstate.engine.recording.cassette import Cassette
    from loopstate.engine.recording.replay import ReplayDivergence

    try:
        tape = Cassette.load(args.cassette)
        agent = _agent(args.agent) if args.agent else None
        machine = _machine(tape)
        if args.from_step is not None:
            return _departure(tape, agent, args)
        if agent is None and machine != "agent":
            raise LoopstateError(
                f"{args.cassette} records a {machine} run: replay it with --agent module:attr "
                "naming that flow"
            )
        result = asyncio.run(_replay(tape, agent))
    except ReplayDivergence as exc:
        for line in str(exc).splitlines():  # a multi-line diff: each line shown safely
            print(shown(line), file=sys.stderr)
        return 1
    except LoopstateError as exc:
        print(shown(f"loopstate replay: {exc}"), file=sys.stderr)
        return 2
    for t in result.transitions:
        print(shown(f"  [{t.seq:>2}] {t.source} → {t.target} ({t.event})"))
    decisions = tape.decisions()
    for call_id, record in tape.tool_results().items():
        decided = decisions.get(call_id, {}).get("decision", {}).get("kind")
        note = f" [{decided}]" if decided else ""
        print(shown(f"  tool {record['tool']}({shown_json(record['arguments'])}){note} → "
                    f"{record['status']}"))  # fmt: skip
    print(
        shown(f"status: {result.status}   stop reason: {result.stop_reason}   (replayed cleanly)")
    )
    if result.output:
        print(shown(f"answer: {result.output}"))
    if args.diagram:
        from loopstate.engine.diagram import graph_of, overlay_of, to_mermaid
        from loopstate.machines import machine_class

        graph = graph_of(machine_class(machine))
        print(to_mermaid(graph, overlay_of(result.transitions, result.transitions[-1].target)))
    return 0


def _departure(tape: Cassette, agent: Any, args: argparse.Namespace) -> int:
    from loopstate.machines.agent import Agent
    from loopstate.replay import replay

    if not isinstance(agent, Agent):
        raise LoopstateError("--from-step needs --agent module:attr naming the Agent to go on live")
    report = asyncio.run(replay(tape, agent, from_step=args.from_step))
    if args.json:
        print(report.model_dump_json(exclude={"result"}, indent=2))
    else:
        print("\n".join(shown(line) for line in report.lines()))
    return 0


def _machine(tape: Cassette) -> str:
    """The machine the run was recorded on (cassettes from before the run record: agent)."""
    runs = tape.of_kind("run")
    return str(runs[0].get("machine") or "agent") if runs else "agent"


async def _replay(tape: Cassette, agent: Any) -> Any:
    from loopstate.machines.flows import Flow
    from loopstate.replay import replay, replay_flow

    if isinstance(agent, Flow):
        return await replay_flow(tape, agent)
    return await replay(tape, agent)


def _agent(spec: str) -> Any:
    from loopstate.cli.lookup import load_agent

    return load_agent(spec)
