"""`loopstate temporal worker|start|reply|pending|show|approve|deny|edit|abort|retry|pause|
resume`: agent and flow runs on Temporal, as `loopstate runs ...` works on a store. Needs the
`loopstate[temporal]` extra."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from loopstate.cli.limits import budget_of
from loopstate.cli.runs import _json_object, _json_value, _show, _user, load_agent
from loopstate.cli.text import shown, shown_json
from loopstate.engine.errors import DefinitionError, LoopstateError, RunNotFound
from loopstate.engine.state import RunState

DEFAULT_ADDRESS = os.environ.get("LOOPSTATE_TEMPORAL_ADDRESS", "localhost:7233")
Command = Callable[[argparse.Namespace, Any], Coroutine[Any, Any, int]]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "temporal", help="agent and flow runs on Temporal (loopstate[temporal])"
    )
    which = parser.add_subparsers(dest="temporal_command", required=True, metavar="SUBCOMMAND")
    worker = _command(which, "worker", _worker, help="serve agents and flows until interrupted")
    worker.add_argument(
        "--agent", action="append", required=True, metavar="NAME=MODULE:ATTR",
        help="an Agent or a Flow to serve under NAME (repeat for several)",
    )  # fmt: skip
    start = _command(which, "start", _start, help="start a run of a served agent or flow")
    start.add_argument("agent")
    start.add_argument("prompt")
    start.add_argument("--run-id")
    start.add_argument("--flow", action="store_true", help="NAME is a served flow")
    start.add_argument("--data", help="a flow's data known up front, a JSON object")
    start.add_argument("--local-model", action="store_true", help="model call as local activity")
    start.add_argument("--wait", action="store_true", help="wait for the run to end or pause")
    reply = _command(which, "reply", _reply, help="the user's next message to a waiting flow")
    reply.add_argument("run")
    reply.add_argument("message")
    reply.add_argument("--actor", default=f"cli:{_user()}")
    pending = _command(which, "pending", _pending, help="calls waiting for a decision (no worker)")
    pending.add_argument("--agent", help="only this served agent's runs")
    pending.add_argument("--json", action="store_true")
    show = _command(which, "show", _show_run, help="one run: state, transitions, pending calls")
    show.add_argument("run")
    show.add_argument("--json", action="store_true")
    for name, helptext in (
        ("approve", "approve a pending call"),
        ("deny", "deny a pending call; the model sees the reason"),
        ("edit", "run a pending call with other arguments"),
        ("result", "supply the result of an external tool's call"),
    ):
        decide = _command(which, name, _decide, help=helptext)
        decide.add_argument("run")
        decide.add_argument("call")
        decide.add_argument("--actor", default=f"cli:{_user()}")
        decide.add_argument("--signal", action="store_true", help="fire and forget (no worker)")
        if name == "deny":
            decide.add_argument("--reason", required=True)
        if name == "edit":
            decide.add_argument("--args", required=True, help="the new arguments, a JSON object")
        if name == "result":
            decide.add_argument("--value", required=True, help="the result, as JSON")
    abort = _command(which, "abort", _abort, help="end a run at its next step boundary")
    abort.add_argument("run")
    abort.add_argument("--reason", required=True)
    abort.add_argument("--actor", default=f"cli:{_user()}")
    abort.add_argument("--signal", action="store_true", help="fire and forget (no worker)")
    replay = which.add_parser(
        "replay", help="replay a recorded history against the current agent (no server)"
    )
    replay.add_argument("history", help="a JSON history (temporal workflow show --output json)")
    replay.add_argument(
        "--agent", required=True, metavar="MODULE:ATTR", help="the Agent or Flow now"
    )
    replay.set_defaults(func=_replay)
    retry = _command(which, "retry", _retry, help="call the model again for a model_failed run")
    retry.add_argument("run")
    retry.add_argument("--actor", default=f"cli:{_user()}")
    pause = _command(which, "pause", _pause, help="stop a running run at its next step boundary")
    pause.add_argument("run")
    pause.add_argument("--actor", default=f"cli:{_user()}")
    pause.add_argument("--signal", action="store_true", help="fire and forget (no worker)")
    resume = _command(
        which, "resume", _resume, help="continue a paused run, or one over its budget"
    )
    resume.add_argument("run")
    resume.add_argument("--actor", default=f"cli:{_user()}")
    resume.add_argument(
        "--budget", action="append", metavar="LIMIT=VALUE",
        help="raise a limit of the run's budget (tokens, cost_usd, tool_calls, model_calls, "
        "wall_s; repeat for several)",
    )  # fmt: skip


def _command(subparsers: Any, name: str, run: Command, **kwargs: Any) -> Any:
    parser = subparsers.add_parser(name, **kwargs)
    parser.add_argument("--address", default=DEFAULT_ADDRESS, help="host:port (%(default)s)")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--task-queue", default="loopstate")
    parser.add_argument("--blobs", help="directory for payloads passed by reference (shared)")
    parser.set_defaults(func=lambda args: _main(run, args))
    return parser


def _main(run: Command, args: argparse.Namespace) -> int:
    return _exit(_run(run, args))


def _replay(args: argparse.Namespace) -> int:
    """`replay`: no server, no connection: the history file against the agent."""
    where = "loopstate temporal replay"
    try:
        from loopstate.temporal.replay import replay_history

        agent = load_agent(args.agent)  # an Agent or a Flow
        report = asyncio.run(replay_history(args.history, agent))
    except ImportError as exc:
        print(f"{where}: needs the temporal extra (pip install 'loopstate[temporal]'): {exc}",
              file=sys.stderr)  # fmt: skip
        return _exit(2)
    except LoopstateError as exc:
        print(shown(f"{where}: {exc}"), file=sys.stderr)
        return _exit(2)
    if not report.ok:
        print(shown(f"{where}: {report.error}"), file=sys.stderr)
        return _exit(1)
    print(shown(f"{args.history}: {report.histories} history(ies) replay against {args.agent}"))
    return _exit(0)


def _exit(code: int) -> int:
    # temporalio's Rust threads can abort the interpreter as it finalizes (sdk-python#300,
    # seen here after a failed connect): a command that has said everything ends at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(run: Command, args: argparse.Namespace) -> int:
    where = f"loopstate temporal {args.temporal_command}"
    try:
        return asyncio.run(_connected(run, args))
    except ImportError as exc:
        print(f"{where}: needs the temporal extra (pip install 'loopstate[temporal]'): {exc}",
              file=sys.stderr)  # fmt: skip
    except (LoopstateError, RuntimeError) as exc:  # RuntimeError: temporalio cannot connect
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(shown(f"{where}: {first}"), file=sys.stderr)
    return 2


async def _connected(run: Command, args: argparse.Namespace) -> int:
    from loopstate.temporal import RunSettings, TemporalRuns

    settings = RunSettings(by_reference=args.blobs is not None)
    if getattr(args, "local_model", False):
        settings = settings.evolve(local_model=True)
    runs = await TemporalRuns.connect(
        args.address, namespace=args.namespace, blobs=args.blobs,
        task_queue=args.task_queue, settings=settings,
    )  # fmt: skip
    return await run(args, runs)


async def _worker(args: argparse.Namespace, runs: Any) -> int:
    from loopstate.temporal import agent_worker

    agents = {}
    for spec in args.agent:
        name, _, target = spec.partition("=")
        if not name or not target:
            raise DefinitionError(f"--agent takes NAME=MODULE:ATTR, not {spec!r}")
        agents[name] = load_agent(target)
    worker = agent_worker(runs.client, agents, task_queue=args.task_queue)
    print(shown(f"serving {', '.join(agents)} on {args.task_queue}"), file=sys.stderr, flush=True)
    await worker.run()
    return 0


async def _start(args: argparse.Namespace, runs: Any) -> int:
    if args.flow:
        data = _json_object(args.data) if args.data is not None else None
        run_id = await runs.start_flow(args.agent, args.prompt, data=data, run_id=args.run_id)
    elif args.data is not None:
        raise DefinitionError("--data is a flow's: add --flow")
    else:
        run_id = await runs.start(args.agent, args.prompt, run_id=args.run_id)
    print(shown(run_id))
    if not args.wait:
        return 0
    while True:  # until it ends or waits for a decision
        state: RunState = await runs.state(run_id)
        if state.status != "running":
            print(shown(f"{run_id}: {state.status}"))
            return 0 if state.status != "failed" else 1
        await asyncio.sleep(0.2)


async def _pending(args: argparse.Namespace, runs: Any) -> int:
    from loopstate.cli.runs_tree import by_deadline, due_label

    calls = by_deadline(await runs.inbox(agent=args.agent))
    if args.json:
        print(json.dumps([c.model_dump(mode="json") for c in calls], indent=2))
        return 0
    if not calls:
        print("no pending calls")
    for c in calls:
        print(shown(f"{c.run_id}  {c.call_id}  {c.tool} {shown_json(c.arguments)}{due_label(c)}"))
    return 0


class _OneRun:
    """The run a Query returned, as the store `loopstate runs show` reads."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    async def load(self, run_id: str) -> RunState:
        if run_id != self.state.run_id:
            raise RunNotFound(run_id)
        return self.state


SHOW_WITHIN_S = 1.5
"""How long `show` waits for a worker to answer (the command answers within 2 s)."""


async def _show_run(args: argparse.Namespace, runs: Any) -> int:
    state = await runs.state(args.run, within=SHOW_WITHIN_S)
    return await _show(args, _OneRun(state))  # type: ignore[arg-type]


async def _decide(args: argparse.Namespace, runs: Any) -> int:
    form: dict[str, Any] = {"kind": args.temporal_command}
    if args.temporal_command == "deny":
        form["reason"] = args.reason
    if args.temporal_command == "edit":
        form["arguments"] = _json_object(args.args)
    if args.temporal_command == "result":
        form["value"] = _json_value(args.value)
    await runs.decide(args.run, args.call, form, actor=args.actor, wait=not args.signal)
    done = "sent" if args.signal else "accepted"
    print(shown(f"{args.temporal_command} {done} for {args.call} of run {args.run}"))
    return 0


async def _reply(args: argparse.Namespace, runs: Any) -> int:
    await runs.reply(args.run, args.message, actor=args.actor)
    print(shown(f"reply accepted for run {args.run}"))
    return 0


async def _abort(args: argparse.Namespace, runs: Any) -> int:
    await runs.abort(args.run, args.reason, actor=args.actor, wait=not args.signal)
    print(shown(f"abort {'sent' if args.signal else 'accepted'} for run {args.run}"))
    return 0


async def _retry(args: argparse.Namespace, runs: Any) -> int:
    await runs.retry(args.run, actor=args.actor)
    print(shown(f"retry accepted for run {args.run}"))
    return 0


async def _pause(args: argparse.Namespace, runs: Any) -> int:
    running = await runs.pause(args.run, actor=args.actor, wait=not args.signal)
    if args.signal:
        print(shown(f"pause sent for run {args.run}"))
    elif running:
        print(shown(f"pause accepted for run {args.run}: it stops at its next step boundary"))
    else:
        print(shown(f"run {args.run} is not running: it stays as it is"))
    return 0


async def _resume(args: argparse.Namespace, runs: Any) -> int:
    budget = budget_of(args.budget) if args.budget else None
    await runs.resume(args.run, budget=budget, actor=args.actor)
    print(shown(f"resume accepted for run {args.run}"))
    return 0
