"""What crosses Temporal's boundary: workflow input, updates, signals and activity payloads.

Plain frozen pydantic data (the pydantic data converter carries it), new fields only with
defaults: a run started by one version of loopstate is continued by the next.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.budget import Budget
from loopstate.engine.data import Frozen
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.rule import Rule
from loopstate.engine.state import CallRecord, ParentLink, RunState

WORKFLOW = "loopstate.agent"
"""The workflow type every agent run has (the agent is named in its input)."""
FLOW_WORKFLOW = "loopstate.flow"
"""The workflow type every flow run has (the flow is named in its input)."""
MODEL_ACTIVITY = "loopstate.model"
TOOL_ACTIVITY = "loopstate.tool"

STATUS_ATTRIBUTE = "LoopstateStatus"
"""Keyword search attribute: the run's status (`running`, `awaiting_approval`, `done`, ...)."""
PENDING_ATTRIBUTE = "LoopstatePending"
"""KeywordList search attribute: the ids of the calls waiting for a decision."""
AGENT_ATTRIBUTE = "LoopstateAgent"
"""Keyword search attribute: the served agent's name."""
SEARCH_ATTRIBUTES = {STATUS_ATTRIBUTE: "Keyword", PENDING_ATTRIBUTE: "KeywordList",
                     AGENT_ATTRIBUTE: "Keyword"}  # fmt: skip


class RunSettings(Frozen):
    """How one run uses Temporal. Part of the run's input (and carried across
    continue-as-new), so every worker that replays it makes the same commands."""

    kind: Literal["settings"] = "settings"
    local_model: bool = False
    """The model call as a local activity (fewer history events, no task-queue hop; retried by
    the worker that runs the workflow task)."""
    model_timeout_s: float = 600.0
    model_attempts: int = 3
    """Temporal's attempts for a model call whose worker died or timed out; errors the model
    port reports (`ModelError`) are not retried by Temporal (the engine's `RetryingModel` does)."""
    tool_timeout_s: float = 600.0
    """Start-to-close limit of a tool activity whose tool declares no timeout."""
    heartbeat_s: float = 30.0
    """A tool activity heartbeats every third of this; a worker that stops is noticed after it."""
    idempotent_attempts: int = 3
    """Temporal's attempts for an idempotent tool."""
    unstarted_attempts: int = 3
    """Temporal's attempts for a non-idempotent tool whose body has not begun (its worker was
    lost before): once an attempt has begun the body, none follows it."""
    continue_after_steps: int = 200
    """Continue as new after this many model steps in one workflow run (or when Temporal
    suggests it), carrying the run state."""
    by_reference: bool = False
    """Payloads past `payload_limit` go to a blob store (`BlobCodec`): set by a client that has
    one. Without it a transcript past the limit fails the run with a clear error instead of
    wedging the workflow in task retries."""
    payload_limit: int = 2_000_000
    search_attributes: bool = True
    """Publish status and pending calls as search attributes (registered on the namespace)."""


class StartRun(Frozen):
    """The workflow's input: a new run (`prompt`) or one carried across continue-as-new."""

    kind: Literal["start"] = "start"
    agent: str
    """The served agent's name, or a sub-agent's address (`docs/research`: see `catalog`)."""
    prompt: str = ""
    state: RunState | None = None
    settings: RunSettings = RunSettings()
    parent: ParentLink | None = None
    """A child run's parent (a sub-agent's call, a flow's agent phase): its workflow is told
    how the child stands, and decides the child's calls through it."""
    children: tuple[RunState, ...] = ()
    """What the run knew of its child runs, carried across continue-as-new."""
    budget: Budget | None = None
    """A child run's budget: its parent's, counted over the tree (`child_budget`)."""
    above: tuple[RunState, ...] = ()
    """A child run's tree above it when it started, as its parent knew it (no messages)."""


class StartFlow(Frozen):
    """A flow workflow's input: a new run (the user's first `message` and any `data` known up
    front) or one carried across continue-as-new."""

    kind: Literal["start_flow"] = "start_flow"
    flow: str
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    state: RunState | None = None
    settings: RunSettings = RunSettings()
    children: tuple[RunState, ...] = ()


class ReplyRequest(Frozen):
    """The user's next message to a flow that waits for it (Update `reply`)."""

    kind: Literal["reply"] = "reply"
    message: str
    actor: str = "user"


class ChildState(Frozen):
    """How a child run stands, sent to its parent's workflow (Signal `child`) whenever that
    changes: its state without its messages, and those of its own children."""

    kind: Literal["child_state"] = "child_state"
    states: tuple[RunState, ...]


class DecideRequest(Frozen):
    """A decision for one pending call (Update: validated at once; Signal: applied later)."""

    kind: Literal["decide"] = "decide"
    call_id: str
    decision: dict[str, Any]
    """A decision's dict form (`{"kind": "approve"}`; see `loopstate.engine.approval`)."""
    actor: str = "user"


class RetryRequest(Frozen):
    """Call the model again for a run resting in `model_failed` (Update `retry`)."""

    kind: Literal["retry"] = "retry"
    actor: str = "user"


class PauseRunRequest(Frozen):
    """Ask a running run to stop at its next step boundary (Update or Signal `pause`)."""

    kind: Literal["pause"] = "pause"
    actor: str = "user"


class ResumeRunRequest(Frozen):
    """Continue a run resting in `paused`, or in `budget_exceeded` with `budget` raising the
    limits it names (Update `resume`)."""

    kind: Literal["resume"] = "resume"
    actor: str = "user"
    budget: Budget | None = None


class AbortRequest(Frozen):
    kind: Literal["abort"] = "abort"
    reason: str = "aborted"
    actor: str = "user"


class ModelCall(Frozen):
    kind: Literal["model_call"] = "model_call"
    agent: str
    """The address of the agent, or flow phase, whose model it is (see `catalog`)."""
    request: ModelRequest
    classify: bool = False
    """Return the reply's calls classified (`ModelStep.records`) by the served definition."""
    run_id: str = ""
    rules: tuple[Rule, ...] = ()
    """The run's rules, which gate or forbid calls as its tools do."""
    data: dict[str, Any] | None = None
    """A flow's data, for its phase's gating predicates (their `ctx.deps`, a `FlowDeps`)."""


class ModelStep(ModelResponse):
    """A model activity's result: the reply and, when asked (`ModelCall.classify`), each of
    its calls classified when the model was called (invalid, forbidden, waiting for a
    decision and why, or approved) by the definition the worker served then. Recorded in the
    history, so a replay under a changed definition classifies nothing again."""

    records: tuple[CallRecord, ...] | None = None


class ToolCallRun(Frozen):
    kind: Literal["tool_call"] = "tool_call"
    agent: str
    run_id: str
    record: CallRecord
    data: dict[str, Any] | None = None
    """A flow phase's call: the flow's data, its tools' `ctx.deps.data`."""


class PendingCall(ApprovalRequest):
    """A call waiting for a decision, as the inbox across runs lists it: the request a person
    sees (every `ApprovalRequest` field, kept in step with it) and where it waits."""

    kind: Literal["pending_call"] = "pending_call"
    run_id: str
    agent: str
