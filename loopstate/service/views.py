"""What the API answers with: runs, their transitions and calls, pending approvals, as JSON
data (field names are the HTTP contract)."""

from __future__ import annotations

from typing import Any

from loopstate.engine.state import CallRecord, RunState, Transition
from loopstate.engine.store import RunSummary


def transition_view(run_id: str, t: Transition) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "seq": t.seq,
        "from": t.source,
        "to": t.target,
        "event": t.event,
        "time": t.at,
        "reason": t.reason,
        "actor": t.actor,
    }


def requested_at(state: RunState) -> float:
    """When the current batch started waiting: its last move into `awaiting_approval`."""
    for t in reversed(state.transitions):
        if t.target == "awaiting_approval":
            return t.at
    return state.updated_at


def approvals_of(state: RunState) -> list[dict[str, Any]]:
    """The run's calls that still wait for a decision (not those with one queued)."""
    queued = {q.call_id for q in state.inbox}
    at = requested_at(state)
    schemas = {c.call_id: c.result_schema for c in state.batch if c.external}
    return [
        {
            "run_id": state.run_id,
            "call_id": p.call_id,
            "tool": p.tool,
            "arguments": p.arguments,
            "digest": p.digest,
            "reason": p.reason,
            "metadata": p.metadata,  # e.g. an MCP tool's server and annotations (`mcp`)
            "assignee": _assignee(p.metadata),  # who is asked, named by a Gate (filter: mine)
            "requested_at": at,
            "deadline": p.deadline,  # when a decision is due (`@tool(decide_within=...)`)
            "external": p.external,  # waits for a result (.../result), not a decision
            "result_schema": schemas.get(p.call_id),  # the type that result must have
        }
        for p in state.pending
        if p.call_id not in queued
    ]


def _assignee(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("assignee")
    return value if isinstance(value, str) else None


def call_view(call: CallRecord) -> dict[str, Any]:
    return {
        "call_id": call.call_id,
        "tool": call.tool,
        "arguments": call.arguments,
        "executed_arguments": call.executed_arguments,
        "digest": call.digest,
        "status": call.status,
        "reason": call.reason,
        "decision": None if call.decision is None else call.decision.kind,
        "decided_by": call.decided_by,
        "decision_reason": getattr(call.decision, "reason", None),
        "decided_at": call.decided_at,
        "result": call.result,
    }


def summary_view(summary: RunSummary) -> dict[str, Any]:
    """A listed run; a damaged one (`status: "damaged"`) carries its `problem`."""
    return summary.model_dump(mode="json", exclude=None if summary.problem else {"problem"})


def run_view(state: RunState) -> dict[str, Any]:
    return {
        "run_id": state.run_id,
        "machine": state.machine,
        "state": state.state,
        "status": state.status,
        "phase": state.phase,
        "pending": approvals_of(state),
        "queued": [
            {"call_id": q.call_id, "decision": q.decision.kind, "actor": q.actor, "at": q.at}
            for q in state.inbox
        ],
        "transitions": [transition_view(state.run_id, t) for t in state.transitions],
        "messages": [m.model_dump(mode="json", exclude_none=True) for m in state.messages],
        "calls": [call_view(c) for c in state.calls],
        "remembered": [r.model_dump(mode="json", exclude={"kind"}) for r in state.remembered],
        "usage": state.usage.model_dump(mode="json"),
        "steps": state.steps,
        "output": state.output,
        "stop_reason": state.stop_reason,
        "error": state.error,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "forked_from": None
        if state.forked_from is None
        else state.forked_from.model_dump(mode="json"),
    }
