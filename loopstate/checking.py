"""Which stored runs would resume under an agent or a flow as it is now (`check_runs`): what
`loopstate runs check`, the service's `GET /api/runs?compatible=false` and the inbox ask
before a deploy. Each run is judged as `resume` would judge it (`Agent.check_run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopstate.engine.pinning import Judgement
from loopstate.engine.store import RunSummary, Store

if TYPE_CHECKING:
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

_ALL = 1_000_000
_OVER = ("done", "aborted")


def machine_of(target: Agent | Flow) -> str:
    """The machine name of the runs `target` resumes."""
    from loopstate.machines.flows import Flow

    return target.name if isinstance(target, Flow) else "agent"


def open_run(summary: RunSummary) -> bool:
    """Whether a listed run is not final (a run stopped in `model_failed` resumes)."""
    return summary.status not in _OVER and (
        summary.status != "failed" or summary.state == "model_failed"
    )


async def check_runs(target: Agent | Flow, store: Store) -> list[Judgement]:
    """The verdict on every run of `store` that is not final and that `target` resumes (its
    machine's runs; a sub-agent's runs are resumed by their parent's, and left out)."""
    machine = machine_of(target)
    found: list[Judgement] = []
    for summary in await store.list_runs(limit=_ALL, by="created"):
        if summary.machine != machine or not open_run(summary):
            continue
        judged = await target.check_run(summary.run_id)
        if judged.state.parent is None:
            found.append(judged)
    return list(reversed(found))  # oldest first
