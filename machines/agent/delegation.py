"""Sub-agents as tools: a call that runs another `Agent` as a child run in the parent's store.

    parent call ──start or resume──▶ child run (its own id, tools, audit trail)
         ▲                               │ done(output) │ suspended │ paused │ failed
         └──── result / waits / rests / fails ◀┘

The child's id is derived from the parent's run id and call id (`child_run_id`), and the
parent's call records it before the child starts: a parent resumed after a crash continues
the same child, never a second one. The child decides nothing on its own: its gated calls go
to the top-level approver (the parent run's), a tool that an ancestor gates stays gated in
the child whatever the child declares, and the child auto-approves only if its ancestors do
(the stricter policy wins). The rules of every run above (`Agent(rules=)`, `Flow(rules=)`)
hold in the child with its own (`rule.stricter`): a call an ancestor's rule forbids is denied
in the child and no approval through any door lets it run (the child's run keeps the rules,
so `check_decision` refuses it there), and a call an ancestor's rule gates waits for a
decision in the child. `run_child` is the one entry point (flows' phases reuse it).

A child that rests (paused by its own id or by a pause asked of a run above it, or at the
tree's budget) rests its parent with it, the parent's call waiting for it; the parent's resume
continues the same child run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

from loopstate.engine.approval import Approver, Gate
from loopstate.engine.budget import Budget, Overrun
from loopstate.engine.core import Cause
from loopstate.engine.data import Frozen
from loopstate.engine.errors import RunNotFound, RunNotResumable
from loopstate.engine.hooks import Hooks, child_observer
from loopstate.engine.result import RunResult
from loopstate.engine.rule import Rule, stricter
from loopstate.engine.state import CallRecord, ParentLink, RunState
from loopstate.engine.store import Store
from loopstate.engine.tool import Tool, ToolContext
from loopstate.engine.tree import pending_tree
from loopstate.engine.truncation import truncate

if TYPE_CHECKING:
    from loopstate.machines.agent.agent import Agent
    from loopstate.machines.agent.steps import LoopSteps


class DelegatedTask(BaseModel):
    """What the parent's model sends a sub-agent."""

    task: str = Field(description="The task for the sub-agent, with everything it needs to know.")


def _runs_in_its_parent(task: str) -> str:
    raise RuntimeError("a sub-agent runs through its parent's loop, not as a plain function")


@dataclass(frozen=True)
class AgentTool(Tool):
    """A tool that delegates to a sub-agent (`Agent.as_tool`): each call is a child run."""

    agent: Agent | None = None
    direct_return: bool = False
    """The child's output ends the parent run as its output, with no further model call."""
    inherited_gates: Mapping[str, Tool] = field(default_factory=dict)
    """Gated tools of the runs above the one that holds this tool: they stay gated below."""
    replayed: Callable[[str], Agent] | None = None
    """Under replay: the sub-agent that replays the recorded child run of a call (by id)."""


class ChildOutcome(Frozen):
    """How a child run stands for its parent's call."""

    kind: Literal["done", "suspended", "paused", "failed", "aborted", "over_budget"]
    run_id: str
    output: str = ""
    """The child's answer (done), or why it failed or was aborted."""
    pending: int = 0
    """Calls waiting for a decision in the child and its own children (suspended)."""
    actor: str = "system"
    """Who aborted it (aborted): a person's `Abort` anywhere in a tree aborts the tree; who
    paused it (paused): its parent rests in `paused` too, and the parent's resume continues it."""
    overrun: Overrun | None = None
    """The tree's budget it rests at (over_budget): its parent rests there too, and a resume
    with a raised budget continues both. `run_child` reports it, and so does a Temporal
    parent for its child workflow (`loopstate.temporal.child_budget`)."""

    def abort_cause(self, name: str) -> Cause:
        """Why the run that waited for this aborted child is aborted too."""
        return Cause(f"sub-agent {name} (run {self.run_id}) was {self.output}", self.actor)


@dataclass(frozen=True)
class ChildScope:
    """What a child run takes from the run that starts it: the store, the top-level approver,
    whether that run auto-approves, and every gate above it."""

    store: Store
    approver: Approver | None
    auto_approve: bool
    gates: Mapping[str, Tool]
    recorder: Hooks | None = None
    """The recorder of the child's cassette when the parent run is recorded."""
    observer: Hooks | None = None
    """The parent's hooks, told what the child does (`ChildObserver`)."""
    budget: Budget | None = None
    """The parent run's budget: the child keeps it, counted over the whole tree."""
    rules: tuple[Rule, ...] = ()
    """The rules of the runs above (the parent run's, which hold its ancestors'): they hold
    in the child with its own, the stricter wins (`rule.stricter`)."""
    steps_left: int | None = None
    """The model calls a flow's step cap leaves the child (`Flow(max_steps=)`, over the
    flow's tree): its own step limit is at most its calls so far plus these."""


class ChildRunner(Protocol):
    """Starts or continues a child run and reports how it stands: `run_child` in this
    process; a Temporal workflow runs it as a child workflow (`loopstate.temporal`)."""

    async def __call__(
        self, agent: Agent, prompt: str, *, run_id: str, parent: ParentLink, scope: ChildScope
    ) -> ChildOutcome: ...


def child_run_id(parent_run_id: str, call_id: str) -> str:
    """The child run of `call_id` in `parent_run_id`: deterministic and URL-safe."""
    digest = hashlib.sha256(f"{parent_run_id}\0{call_id}".encode()).hexdigest()
    return f"sub_{digest[:32]}"


async def run_child(
    agent: Agent, prompt: str, *, run_id: str, parent: ParentLink, scope: ChildScope
) -> ChildOutcome:
    """Start the child run `run_id` of `agent`, or resume it if the store has it (an ended
    child is only read), and report how it stands."""
    try:
        state = await scope.store.load(run_id)
    except RunNotFound:
        child = under_parent(agent, scope)
        result = await child.start_child(prompt, run_id=run_id, parent=parent)
    else:
        child = under_parent(agent, scope, done=state.steps)
        result = await _continued(child, state, scope)
    over = result.failure.budget if result.failure is not None else None
    if result.status == "failed" and over is not None:  # resting in `budget_exceeded`
        return ChildOutcome(kind="over_budget", run_id=run_id, output=over.message, overrun=over)
    return await child_outcome(scope.store, result)


async def _continued(child: Agent, state: RunState, scope: ChildScope) -> RunResult:
    """The stored child run `state` continued, or as it stands if it has ended. One resting
    at its budget goes on with the parent's (raised) budget; still over it, it stays there."""
    if state.state == "budget_exceeded":
        try:
            return await child.resume_child(state.run_id, budget=scope.budget)
        except RunNotResumable:
            return RunResult.of(state)
    if state.status in ("done", "failed", "aborted"):
        return RunResult.of(state)
    return await child.resume_child(state.run_id)


async def child_outcome(store: Store, result: RunResult) -> ChildOutcome:
    """How the child run that `result` describes stands for its parent's call."""
    run_id = result.run_id
    match result.status:
        case "done":
            return ChildOutcome(kind="done", run_id=run_id, output=result.output or "")
        case "awaiting_approval":
            pending = len(await pending_tree(store, run_id))
            return ChildOutcome(kind="suspended", run_id=run_id, pending=pending)
        case "aborted" | "paused":
            why = result.stop_reason or result.status
            actor = result.transitions[-1].actor if result.transitions else None
            kind = result.status
            return ChildOutcome(kind=kind, run_id=run_id, output=why, actor=actor or "system")
        case _:
            why = result.error or result.stop_reason or "no reason recorded"
            return ChildOutcome(kind="failed", run_id=run_id, output=f"{result.status}: {why}")


def under_parent(agent: Agent, scope: ChildScope, *, done: int = 0) -> Agent:
    """`agent` as a child of `scope`: same store, the top-level approver, stricter gates and
    rules, and a step limit within what a flow's cap leaves (`done`: the child's calls so
    far)."""
    tools = [_stricter(t, scope.gates) for t in agent.tools]
    hooks = agent.options.hooks
    own = list(hooks.hooks) if hooks is not None else []
    added = [h for h in (scope.recorder, scope.observer) if h is not None]
    return agent.clone(
        hooks=[*own, *added],
        store=scope.store,
        approver=scope.approver,
        auto_approve=scope.auto_approve and bool(agent.options.auto_approve),
        tools=tools,
        budget=scope.budget or agent.options.budget,
        rules=stricter(scope.rules, agent.options.rules),
        max_steps=_step_limit(agent, scope, done),
    )


def _step_limit(agent: Agent, scope: ChildScope, done: int) -> int:
    # the agent's own limit, read from its loop's configuration (kept there, not public)
    own = agent._loop.max_steps
    if scope.steps_left is None:
        return own
    return max(1, min(own, done + scope.steps_left))


def _stricter(tool: Tool, gates: Mapping[str, Tool]) -> Tool:
    """`tool`, gated also wherever a gate above gates a tool of its name or function."""
    if isinstance(tool, AgentTool):
        tool = replace(tool, inherited_gates=gates)
    same_fn = not isinstance(tool, AgentTool)  # every sub-agent tool shares one stub fn
    above = [g for g in gates.values() if g.name == tool.name or (same_fn and g.fn is tool.fn)]
    if not above or tool.external:
        return tool

    def gate(args: BaseModel, ctx: ToolContext[Any]) -> bool | Gate:
        own = tool.gated(args, ctx)
        if own:
            return own
        for g in above:
            try:
                verdict = g.gated(g.validate(args.model_dump()), ctx)
            except Exception:  # the gate above cannot judge these arguments: ask
                return True
            if verdict:
                return verdict
        return False

    return replace(tool, needs_approval=gate)


class Delegations:
    """The agent loop's side of delegation: runs its sub-agent calls as child runs."""

    def __init__(self, loop: LoopSteps) -> None:
        self.loop = loop
        self.aborted: Cause | None = None
        """Set when a child run was aborted (a person's `Abort` in it): the loop aborts too."""
        self.over_budget: Overrun | None = None
        """Set when a child run rested at the tree's budget: the loop rests there too."""
        self.paused: Cause | None = None
        """Set when a child run was paused (by its own id): the loop rests in `paused` too."""

    async def stopped(self) -> bool:
        """Whether a child run stops the loop: a person's abort in one aborts the tree; one
        resting at the tree's budget rests the loop in `budget_exceeded`, one paused rests it
        in `paused`, its call waiting for that child."""
        if self.aborted is not None:
            await self.loop.core.end(self.loop, "abort", self.aborted)
            return True
        over, self.over_budget = self.over_budget, None
        paused, self.paused = self.paused, None
        if over is not None:
            await self.loop.limits.stop(over)
        elif paused is not None:
            await self.loop.pausing.with_child(paused)
        return over is not None or paused is not None

    def tool(self, name: str) -> AgentTool | None:
        found = self.loop.config.tools.get(name)
        return found if isinstance(found, AgentTool) else None

    def scope(self, tool: AgentTool, agent: Agent, call_id: str, run_id: str) -> ChildScope:
        options, tools = self.loop.config.options, self.loop.config.tools
        hooks = self.loop.core.hooks
        # a `Recorder` (duck-typed: `import loopstate` must not import the recorder)
        recorders = [h for h in hooks.hooks if hasattr(h, "for_child")] if hooks else []
        gates = {**tool.inherited_gates}
        gates.update({n: t for n, t in tools.items() if t.needs_approval is not False})
        return ChildScope(
            store=options.store,
            approver=options.approver,
            auto_approve=options.auto_approve,
            gates=gates,
            recorder=recorders[0].for_child(call_id, agent.model) if recorders else None,
            observer=child_observer(hooks, run_id),
            budget=self.loop.state.budget,
            rules=self.loop.state.rules,
        )

    def named(self, record: CallRecord) -> CallRecord:
        """The call with the id of its child run (derived from the run's and the call's): the
        loop saves it before the child starts."""
        return record.evolve(child_run_id=child_run_id(self.loop.state.run_id, record.call_id))

    async def run(self, record: CallRecord, ctx: ToolContext[Any]) -> CallRecord:
        """Run (or continue) the call's child run (`named` and saved first); returns the
        call as the child stands."""
        loop = self.loop
        tool = self.tool(record.tool)
        assert tool is not None
        agent = tool.agent if tool.replayed is None else tool.replayed(record.call_id)
        assert agent is not None
        assert record.child_run_id is not None, "the loop names a child run before it starts"
        arguments = record.executed_arguments or {}
        parent = ParentLink(run_id=loop.state.run_id, call_id=record.call_id, name=tool.name)
        run = loop.config.child_runner or run_child
        outcome = await run(
            agent,
            str(arguments.get("task", "")),
            run_id=record.child_run_id,
            parent=parent,
            scope=self.scope(tool, agent, record.call_id, record.child_run_id),
        )
        if outcome.kind == "aborted" and self.aborted is None:
            self.aborted = outcome.abort_cause(tool.name)
        if outcome.kind == "over_budget" and self.over_budget is None:
            self.over_budget = outcome.overrun
        if outcome.kind == "paused" and self.paused is None:
            why = f"sub-agent {tool.name} (run {outcome.run_id}) was paused"
            self.paused = Cause(why, outcome.actor)
        return with_outcome(record, outcome, tool)

    async def resumed(self) -> list[CallRecord]:
        """The batch's calls that wait for their child runs, once each child is continued
        (done, failed, aborted, or still waiting)."""
        loop = self.loop
        waiting = [r for r in loop.state.batch if r.status == "awaiting" and r.child_run_id]
        return [await self.run(r, loop.context(r.call_id, r.tool)) for r in waiting]

    def direct_output(self) -> str | None:
        """The output of the batch's first sub-agent call that ends the run (direct return)."""
        for record in self.loop.state.batch:
            tool = self.tool(record.tool)
            if tool is not None and tool.direct_return and record.status == "succeeded":
                return record.result or ""
        return None


def with_outcome(record: CallRecord, outcome: ChildOutcome, tool: Tool) -> CallRecord:
    """The parent's call as its child stands: succeeded with its output, failed with why,
    or waiting for the child (like an external call whose result the child supplies)."""
    match outcome.kind:
        case "done":
            text = truncate(outcome.output, tool.max_result_chars)
            return record.evolve(status="succeeded", result=text, decided_by="sub-agent")
        case "failed" | "aborted":
            text = f"Error: sub-agent {tool.name} (run {outcome.run_id}) {outcome.output}"
            return record.evolve(status="failed", result=truncate(text, tool.max_result_chars))
        case "suspended" | "over_budget" | "paused":
            reason = f"{tool.name} waits: its run {outcome.run_id} " + (
                f"has {outcome.pending} call(s) to decide"
                if outcome.kind == "suspended"
                else "rests at the budget"
                if outcome.kind == "over_budget"
                else "is paused"
            )
            return record.evolve(
                status="awaiting", reason=reason, external=True, allowed=("abort",)
            )


def agent_tool(agent: Agent, *, name: str, description: str, direct_return: bool) -> AgentTool:
    """The tool `Agent.as_tool` returns."""
    return AgentTool(
        name=name,
        description=description,
        args_model=DelegatedTask,
        fn=_runs_in_its_parent,
        idempotent=True,  # a rerun after a crash continues the same child run
        category="sub-agent",
        agent=agent,
        direct_return=direct_return,
    )
