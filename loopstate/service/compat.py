"""`GET /api/runs?compatible=false`: the runs that are not final whose served agent (or flow)
would refuse them at resume (`true`: those it would take, migrated or not), each with the
verdict and why (`loopstate.checking`; `loopstate runs check` asks the same)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from loopstate.checking import open_run
from loopstate.engine.errors import LoopstateError
from loopstate.engine.store import RunSummary
from loopstate.service.service import Service
from loopstate.service.views import summary_view

_ALL = 1_000_000


async def runs_by_compatibility(
    service: Service,
    compatible: bool,
    status: str | None,
    visible: Callable[[str], Awaitable[bool]],
) -> dict[str, Any]:
    """Every open top-level run (of `status`, if given) that the caller may see (`visible`:
    its tenant's) whose verdict is (in)compatible, newest first, in one page (runs awaiting a
    deploy are few; no cursor)."""
    items: list[dict[str, Any]] = []
    for summary in await service.store.list_runs(status=status, limit=_ALL, by="created"):
        if not open_run(summary) or not await visible(summary.run_id):
            continue
        verdict = await _verdict(service, summary)
        if verdict is not None and (verdict["verdict"] != "incompatible") is compatible:
            items.append({**summary_view(summary), **verdict})
    return {"items": items, "next_cursor": None}


async def _verdict(service: Service, summary: RunSummary) -> dict[str, Any] | None:
    """The run's verdict under the agent serving it; None for a sub-agent's run (its parent's
    is judged) or a run the store cannot read (listed `damaged` by the plain listing)."""
    found = service.runner.agent_of(summary.run_id)
    if found is None:
        why = f"run {summary.run_id}: no agent that resumes it is served here"
        return {"verdict": "incompatible", "migration": None, "why": [why]}
    agent = found[1]
    try:
        judged = await agent.check_run(summary.run_id)
    except LoopstateError:
        return None
    if judged.state.parent is not None:
        return None
    return {"verdict": judged.verdict, "migration": judged.migration, "why": list(judged.lines)}
