"""Typed events: one discriminated union, one log line each."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from loopstate.engine.data import Frozen
from loopstate.engine.model import Usage


class _Event(Frozen):
    run_id: str
    at: float
    step: int = 0


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    machine: str
    model: str


class RunResumed(_Event):
    kind: Literal["run_resumed"] = "run_resumed"
    state: str
    recovered: tuple[str, ...] = ()
    """Call ids found running after a crash (re-run if idempotent, else reported)."""


class RunSuspended(_Event):
    kind: Literal["run_suspended"] = "run_suspended"
    pending: tuple[str, ...]


class RunFinished(_Event):
    kind: Literal["run_finished"] = "run_finished"
    status: str
    stop_reason: str | None = None
    error: str | None = None


class TransitionEvent(_Event):
    kind: Literal["transition"] = "transition"
    seq: int
    source: str
    target: str
    event: str
    reason: str | None = None
    actor: str | None = None


class PhaseChanged(_Event):
    """A flow run entered phase `target` (a final one when it ends): from `source`, or from
    nothing when the run starts; `reason` is the transition's (e.g. the gate that opened)."""

    kind: Literal["phase_changed"] = "phase_changed"
    source: str | None = None
    target: str
    reason: str | None = None


class ModelRequested(_Event):
    kind: Literal["model_request"] = "model_request"
    model: str
    messages: int
    tools: tuple[str, ...]


class ModelResponded(_Event):
    kind: Literal["model_response"] = "model_response"
    model: str
    tool_calls: tuple[str, ...]
    usage: Usage
    text: str | None = None
    reasoning: str | None = None
    """The model's reasoning text, when the provider returned it."""


class ApprovalRequested(_Event):
    kind: Literal["approval_requested"] = "approval_requested"
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str


class ToolApproval(_Event):
    kind: Literal["tool_approval"] = "tool_approval"
    call_id: str
    tool: str
    outcome: Literal["approve", "deny", "edit", "abort", "auto", "result"]
    actor: str
    reason: str | None = None


class DecisionRefused(_Event):
    """A decision queued on a suspended run was refused when applied; it was dropped and the
    call is still pending."""

    kind: Literal["decision_refused"] = "decision_refused"
    call_id: str
    actor: str
    reason: str


class ToolStarted(_Event):
    kind: Literal["tool_started"] = "tool_started"
    call_id: str
    tool: str


class ToolFinished(_Event):
    kind: Literal["tool_finished"] = "tool_finished"
    call_id: str
    tool: str
    status: str
    elapsed_s: float = 0.0


Event = Annotated[
    RunStarted
    | RunResumed
    | RunSuspended
    | RunFinished
    | TransitionEvent
    | PhaseChanged
    | ModelRequested
    | ModelResponded
    | ApprovalRequested
    | ToolApproval
    | DecisionRefused
    | ToolStarted
    | ToolFinished,
    Field(discriminator="kind"),
]
"""Every event of a run, one typed model per `kind` (`run_started`, `transition`,
`model_request`, `tool_approval`, `tool_finished`, a flow's `phase_changed`, ...): in
`RunResult.events` and to hooks."""
