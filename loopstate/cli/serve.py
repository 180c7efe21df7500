"""`loopstate serve`: the HTTP API and the approval pages for some agents, on one store."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import secrets
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopstate.cli.errors import report
from loopstate.cli.stores import add_db_option, check_usable, db_of, open_store
from loopstate.cli.text import shown
from loopstate.engine.errors import DefinitionError, LoopstateError
from loopstate.engine.store import Store


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve the HTTP API and the approval inbox for some agents",
        description="Serve the agents over HTTP (needs `pip install 'loopstate[service]'`). "
        "Requests need the token: --token, else $LOOPSTATE_TOKEN, else one generated and "
        "printed at start. Open the printed /ui/ address to see the approval inbox.",
    )
    parser.add_argument(
        "--agent",
        action="append",
        required=True,
        help="[name=]module:attr of an Agent or Flow (repeatable; the name defaults to attr)",
    )
    add_db_option(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (%(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (%(default)s)")
    parser.add_argument("--token", help="the bearer token (default: $LOOPSTATE_TOKEN or random)")
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stream model calls, for live text in the pages (default); a provider that "
        "refuses streaming gets plain calls instead. --no-stream: plain calls only",
    )
    parser.add_argument(
        "--max-body",
        type=_size,
        default=1024 * 1024,
        help="the largest request body taken, in bytes (default 1 MiB; larger: 413)",
    )
    parser.add_argument("--no-docs", action="store_true", help="serve no /openapi.json and /docs")
    parser.set_defaults(func=main)


def _size(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= 2**40:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes (e.g. 1048576)")
    return int(text)


def main(args: argparse.Namespace) -> int:
    try:
        from loopstate.cli.runs import load_agent

        check_usable(db_of(args))
        store = open_store(db_of(args))
        agents = {}
        for spec in args.agent:
            name, _, target = spec.rpartition("=")
            agents[name or target.rpartition(":")[2]] = load_agent(target).clone(store=store)
        given = args.token or os.environ.get("LOOPSTATE_TOKEN") or None
        token = given or secrets.token_urlsafe(24)
        served = Served(
            args.host, args.port, args.max_body, not args.no_docs, given is None, args.stream
        )
        return serve(agents, store, token, served)
    except LoopstateError as exc:
        return report("serve", exc)


@dataclass(frozen=True)
class Served:
    """Where and how `serve` serves: `show_token` only for a token it generated (a given
    one is never printed: logs keep what a process prints); `stream`: see `Service`."""

    host: str = "127.0.0.1"
    port: int = 8000
    max_body: int = 1024 * 1024
    docs: bool = True
    show_token: bool = True
    stream: bool = True


def serve(agents: dict[str, Any], store: Store, token: str, served: Served) -> int:
    """Serve `agents` on `store` until SIGTERM or SIGINT."""
    try:
        import uvicorn

        from loopstate.service import Service, create_app
    except ImportError as exc:
        raise DefinitionError(
            f"loopstate serve needs the service extra ({exc.name} is missing): "
            "pip install 'loopstate[service]'"
        ) from None
    try:
        service = Service(
            agents, store=store, token=token, max_body=served.max_body, stream=served.stream
        )
        app = create_app(service, docs=served.docs)
    except ValueError as exc:
        raise DefinitionError(str(exc)) from None
    host = served.host
    try:
        listening = listen(host, served.port)
    except OSError as exc:
        print(shown(f"loopstate serve: {_unbound(host, served.port, exc)}"), file=sys.stderr)
        return 1
    shown_host = f"[{host}]" if ":" in host else host
    where = f"http://{shown_host}:{listening.getsockname()[1]}/ui/"
    if served.show_token:
        print(f"loopstate serve: {where}?token={token}", flush=True)
    else:
        print(f"loopstate serve: {where}?token=<your token> (the token you gave)", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    with contextlib.suppress(KeyboardInterrupt):  # as `uvicorn.run`: Ctrl-C is a clean stop
        server.run(sockets=[listening])
    return 0 if server.started else 1  # not started: the app's start-up failed (logged)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` (0: one the OS picks), before anything is printed:
    the address printed is the one served, and a port in use is said before, not after."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's backlog: a request sent once the address is out waits
    except OSError:
        sock.close()
        raise
    return sock


def _unbound(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{host}:{port} is in use (another loopstate serve?): stop it, or pass "
            "--port N (--port 0 takes a free one)"
        )
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another --host or --port"


def serve_demo(port: int) -> int:
    """`loopstate demo --serve`: the demo's run waits for its write to be approved; the inbox
    at the printed address decides it, and this process continues the run."""
    import asyncio
    import tempfile

    from loopstate import demo
    from loopstate.engine.stores.sqlite import SQLiteStore

    root = demo.seed_workspace(demo.SUSPEND_WORKSPACE.resolve())
    # its own store, gone when it stops: no earlier demo's runs in this inbox, none left behind
    with tempfile.TemporaryDirectory(prefix="loopstate-demo-") as held:
        agent = demo.build_agent(root, store=SQLiteStore(Path(held) / "runs.db"))
        try:
            result = asyncio.run(agent.run(demo.TASK, run_id=f"demo.{secrets.token_hex(8)}"))
            print(shown(f"loopstate demo: run {result.run_id} is {result.status}"), flush=True)
            given = os.environ.get("LOOPSTATE_TOKEN") or None
            token = given or secrets.token_urlsafe(24)
            served = Served(port=port, show_token=not given)
            return serve({"demo": agent}, agent.store, token, served)
        except LoopstateError as exc:
            print(shown(f"loopstate demo: {exc}"), file=sys.stderr)
            return 2
