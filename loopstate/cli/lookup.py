"""What a command names: a run by its id or a unique prefix of it (as git takes a short
hash), and the Agent or Flow at `module:attr`, found from the working directory."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from loopstate.engine.errors import DefinitionError, RunNotFound
from loopstate.engine.store import Store

_ALL_RUNS = 1_000_000


async def resolve_run(store: Store, given: str) -> str:
    """The id of the one run whose id is `given` or starts with it."""
    try:
        return (await store.load(given)).run_id
    except RunNotFound:
        pass
    matches = [r.run_id for r in await store.list_runs(limit=_ALL_RUNS)
               if r.run_id.startswith(given)]  # fmt: skip
    if len(matches) == 1 and given:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run {given!r} (`loopstate runs list` shows the runs)")
    shown = ", ".join(sorted(matches)[:5]) + (", ..." if len(matches) > 5 else "")
    raise RunNotFound(f"{given!r} is the start of {len(matches)} runs ({shown}); give more of it")


def load_agent(spec: str) -> Any:
    """The Agent or Flow at module:attr (or returned by the function there). The working
    directory is importable, as with `python -m`: `--agent shop:support` finds `./shop.py`."""
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise DefinitionError(f"--agent takes module:attr (e.g. shop:support), not {spec!r}")
    importable_working_directory()
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise DefinitionError(f"cannot load the agent {spec}: {exc}") from None
    agent = target() if callable(target) and not isinstance(target, Agent | Flow) else target
    if not isinstance(agent, Agent | Flow):
        raise DefinitionError(f"{spec} is not an Agent or a Flow (nor a function returning one)")
    return agent


def importable_working_directory() -> None:
    """Make the working directory importable, as `python -m` does: a command's `module:attr`
    names the project's own modules (`--agent shop:support` finds `./shop.py`)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
