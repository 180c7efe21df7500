"""What `runs list` and `runs pending` read from the store: every run it can, and each run it
cannot read (a corrupt or lost row, a newer loopstate's) named as `damaged` with its reason —
one damaged run never hides the others, and its rows are never rewritten."""

from __future__ import annotations

from typing import Any

from loopstate.engine.errors import RunDamaged, RunNotFound
from loopstate.engine.state import RunState
from loopstate.engine.store import DAMAGED, RunSummary, Store

Listed = RunState | RunSummary
"""A run as read (`RunState`), or a damaged one as listed (`RunSummary` with its `problem`)."""


async def read_listed(store: Store, summaries: list[RunSummary]) -> list[Listed]:
    """Each listed run loaded; one that cannot be read stays as its summary, marked damaged."""
    found: list[Listed] = []
    for summary in summaries:
        if summary.problem is None:
            try:
                found.append(await store.load(summary.run_id))
                continue
            except RunNotFound:
                continue  # gone since it was listed
            except RunDamaged as exc:
                problem = (str(exc).splitlines() or [type(exc).__name__])[0]
                summary = summary.evolve(status=DAMAGED, state=DAMAGED, problem=problem)
        found.append(summary)
    return found


def damaged_json(summary: RunSummary) -> dict[str, Any]:
    return {"run_id": summary.run_id, "machine": summary.machine, "status": DAMAGED,
            "problem": summary.problem, "created_at": summary.created_at,
            "updated_at": summary.updated_at}  # fmt: skip


def damaged_line(summary: RunSummary) -> str:
    return f"run {summary.run_id} is damaged and was skipped: {summary.problem}"
