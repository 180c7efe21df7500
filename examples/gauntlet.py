"""A writer → style reviewer → fact reviewer gauntlet, run offline: `python examples/gauntlet.py`.

Each phase is an agent running as its own child run; the reviewers' verdicts are typed
(`Review`) and code gates decide. The first style review sends the draft back; the writer
revises; both reviewers pass it. The writer's `write` needs approval: here a callback approves
and prints what it saw. The models are scripted (no network); give `gauntlet_flow` litellm
model names to run it for real.
"""

from __future__ import annotations

import asyncio
import tempfile

from loopstate import ApprovalRequest, Approve, MemoryStore
from loopstate.machines.gauntlet import gauntlet_flow
from loopstate.testing import ScriptedModel, call

BRIEF = "a two-sentence release note for loopstate 0.9 (agent phases in flows)"
FIRST = "Flows got better."
SECOND = (
    "A flow phase can now run an agent as its own durable run. Its typed output feeds the gates."
)


def writer() -> ScriptedModel:
    turns = []
    for text in (FIRST, SECOND):
        turns += [
            call("write", {"path": "note.md", "content": text}),
            call("submit_write", {"path": "note.md", "summary": "the 0.9 release note"}),
        ]
    return ScriptedModel(turns, name="writer")


def reviewer(phase: str, *verdicts: dict[str, object]) -> ScriptedModel:
    turns = []
    for verdict in verdicts:
        turns += [call("read", {"path": "note.md"}), call(f"submit_{phase}", verdict)]
    return ScriptedModel(turns, name=phase)


def approve(requests: list[ApprovalRequest]) -> dict[str, Approve]:
    for r in requests:
        print(f"  approving {r.tool} {r.arguments['path']}: {r.arguments['content']!r}")
    return {r.call_id: Approve() for r in requests}


async def main() -> None:
    store = MemoryStore()
    models = {
        "writer": writer(),
        "style": reviewer(
            "style_review", {"approved": False, "notes": "Say what changed."}, {"approved": True}
        ),
        "facts": reviewer("fact_review", {"approved": True}),
    }
    with tempfile.TemporaryDirectory() as workspace:
        flow = gauntlet_flow(models=models, workspace=workspace, store=store, approver=approve)
        result = await flow.run(BRIEF, data={"brief": BRIEF}, run_id="gauntlet-1")
    print(f"{result.status} after {result.data['round']} round(s)")
    for t in result.transitions:
        print(f"  {t.source} → {t.target} ({t.reason})")
    for summary in sorted(await store.list_runs(), key=lambda s: s.run_id):
        child = await store.load(summary.run_id)
        if child.parent is not None:
            print(f"  child run {child.run_id}: {child.status}, {child.steps} model calls")


if __name__ == "__main__":
    asyncio.run(main())
