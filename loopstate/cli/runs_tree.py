"""`runs show` and `runs pending` for a run that delegated to sub-agents: each child run
indented under the call that started it, and what waits for a decision anywhere in the tree.
Model-chosen text is escaped (`shown`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TypeVar

from loopstate.cli.runs_view import message_lines
from loopstate.cli.text import shown, shown_json
from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.tree import RunTree, tree_pending

_INDENT = "    "
_P = TypeVar("_P", bound=ApprovalRequest)


def tree_lines(tree: RunTree, depth: int = 1) -> list[str]:
    """The sub-agents' runs of `tree`, each under its call, its conversation indented."""
    lines: list[str] = []
    if depth == 1 and tree.children:
        lines += ["", "sub-agents:"]
    calls = {c.call_id: c for c in tree.state.calls}
    for call_id, child in tree.children:
        state, pad = child.state, _INDENT * depth
        if call_id in calls:
            started_by = f"{call_id} {calls[call_id].tool}"
        else:  # an agent phase's run
            started_by = f"phase {state.parent.name if state.parent else '?'}"
        lines.append(
            f"{pad[:-2]}↳ {started_by} → run {state.run_id}: {state.status}, {state.steps} steps"
        )
        if state.output:
            lines.append(f"{pad}output: {' '.join(state.output.split())[:300]}")
        lines += [pad + line.strip() for m in state.messages for line in message_lines(m)]
        lines += tree_lines(child, depth + 1)
    return [shown(line) for line in lines]


def pending_lines(tree: RunTree) -> list[str]:
    """What waits for a decision in `tree`, each call with the run it waits in."""
    pending = sorted(tree_pending(tree), key=_due)
    if not pending:
        return []
    lines = ["", "waiting for a decision (in this run and its sub-agents' runs):"]
    lines += [_request(p, tree) for p in pending]
    lines.append(f"decide with: loopstate approve {tree.state.run_id} CALL (or deny/edit; --all)")
    return lines


def _request(p: ApprovalRequest, tree: RunTree) -> str:
    where = "" if p.run_id == tree.state.run_id else f"  (in run {p.run_id})"
    return shown(f"  {p.call_id}  {p.tool} {shown_json(p.arguments)}{where}{due_label(p)}")


def due_label(p: ApprovalRequest) -> str:
    """When a decision on `p` is due, as the listings show it ("" if it has no deadline)."""
    return "" if p.deadline is None else f"  due {_when(p.deadline)}"


def _due(p: ApprovalRequest) -> float:
    return math.inf if p.deadline is None else p.deadline


def by_deadline(pending: list[_P]) -> list[_P]:
    """`pending` soonest deadline first (calls with none last, in their order)."""
    return sorted(pending, key=_due)


def soonest_due(tree: RunTree) -> float:
    """When the first decision waiting in `tree` is due (inf: none has a deadline): `runs
    pending` lists the runs in this order."""
    return min(map(_due, tree_pending(tree)), default=math.inf)


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
