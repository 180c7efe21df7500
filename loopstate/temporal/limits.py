"""A Temporal run's limits, as a local run keeps them (engine/budget, engine/deadlines,
engine/pause, engine/rule), with the workflow as the process that drives the run.

    pause      Update (or Signal) `pause`: kept in the run's `WorkflowStore` as a local run's
               request is kept in its store; the loop takes it at its next step boundary
               (`LoopPause`: before a model call or a batch, nothing in flight) and rests in
               `paused`. A run that is not running (it waits for a decision or the user, it
               rests, it is paused already) stays as it is: the Update answers False.
    resume     Update `resume`: a `paused` run goes on from the step it stopped before; a run
               in `budget_exceeded` goes on once its budget, raised by the limits `budget`
               names, lets that step start (refused at once otherwise, naming the limit); a
               flow resting so in an agent phase goes back to it, its run raised (`child_budget`).
    deadlines  a run waiting for decisions waits on a durable timer (a server timer: it
               survives workers) until its calls' earliest deadline; when it fires, each due
               call's `on_expiry` is queued like a decision that arrived, with actor
               `deadline` (or the call escalated). The workflow is single-threaded: a decision
               that arrived first leaves the call out of the expiry, one that arrives after is
               refused by the Update's validator (the call has a decision queued) — one outcome.
    budgets    `RunState.budget` (from `Agent(budget=)`), checked by the loop itself before
               each model activity and each tool batch (`LoopLimits`); a run resting in
               `budget_exceeded` waits for `resume` (or `abort`). On Temporal a run's spending
               is its own and its child runs' (a workflow knows its children, not its parent).
    rules      `RunState.rules` (from `Agent(rules=)`): the model activity classifies calls by
               them (a gating rule makes a call wait, a forbidding one denies it), and the
               decision Update's validator is `check_decision`, which refuses an approval of a
               call a forbidding rule matches, naming the rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from temporalio import workflow

from loopstate.engine.budget import Budget, Overrun, Spent, overrun
from loopstate.engine.budget import still_over as stopped_still_over
from loopstate.engine.deadlines import (
    DEADLINE,
    due,
    escalated,
    escalated_to,
    expiry_decision,
)
from loopstate.engine.errors import RunNotResumable
from loopstate.engine.events import RunResumed
from loopstate.engine.state import QueuedDecision, RunState
from loopstate.engine.store import PauseRequest
from loopstate.engine.tree import delegated
from loopstate.machines.agent.limits import batch_adds, call_adds, has_batch, withdrawn
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.flows.children import raise_budget
from loopstate.temporal.child_budget import PHASE_RESTS, known_spent
from loopstate.temporal.data import PauseRunRequest, ResumeRunRequest
from loopstate.temporal.ports import workflow_clock

Before = Literal["model call", "tool batch"]
DEADLINE_TIMERS = "loopstate-deadline-timers"
"""The patch (`workflow.patched`) from which a waiting run's deadline is a timer: a run that
waited on a deadline before it replays without one (a timer it never made is not made)."""

if TYPE_CHECKING:
    from loopstate.machines.agent.steps import LoopSteps
    from loopstate.temporal.runs_base import RunWorkflow


def ask_pause(wf: RunWorkflow, request: PauseRunRequest) -> bool:
    """Keep a pause request for a running run, or one that waits only on its working child
    workflow, which the pause goes down to (True: `child_pause`); leave any other run as it is
    (False)."""
    state = wf.core.state
    if state.status != "running" and not wf.children.pausing.works_below(state):
        return False
    if wf.store.pause_request is None:
        wf.store.pause_request = PauseRequest(by=request.actor, at=workflow_clock())
    return True


def still_over(wf: RunWorkflow, raising: Budget | None) -> Overrun | None:
    """The limit a run in `budget_exceeded` would still pass with its budget raised by
    `raising` (None: it may go on, or it is not over its budget)."""
    loop = wf.loop()
    state = wf.core.state
    if state.state != AgentLoop.budget_exceeded.id:
        return None
    budget = (state.budget or Budget()).raised(raising) if raising is not None else state.budget
    if budget is None:
        return None
    stopped = state.failure.budget if state.failure is not None else None
    spent = known_spent(wf.store, state)
    if loop is None:  # a flow's agent phase: its run rested at the budget
        return stopped_still_over(budget, spent, stopped) if stopped is not None else None
    if stopped is not None and not has_batch(state) and any(map(delegated, state.batch)):
        return stopped_still_over(budget, spent, stopped)  # a child rested at the budget
    adds, before = _next_adds(loop, state)
    if adds is None:
        return None
    return overrun(budget, spent, adds, before)


def _next_adds(loop: LoopSteps, state: RunState) -> tuple[Spent | None, Before]:
    if has_batch(state):
        return batch_adds(withdrawn(state)), "tool batch"
    config = loop.config
    request = loop.model_call.request(state, config.view, config.tool_choice)
    return call_adds(state, request), "model call"


async def take_resume(wf: RunWorkflow) -> None:
    """Apply a `resume` that arrived: the budget raised, then `unpause` or `budget_raised`."""
    request, wf.resume_request = wf.resume_request, None
    loop = wf.loop()
    if request is None:
        return
    if loop is None:  # a flow in its agent phase
        where = wf.core.state.state
        if where == AgentLoop.budget_exceeded.id and workflow.patched(PHASE_RESTS):
            await _phase_raised(wf, request)
        elif where == AgentLoop.paused.id and await wf.children.pausing.resume(
            wf.core.state, request.actor
        ):  # its phase's run was paused: it goes on, the flow waits for it in the phase
            await wf.core.emit(RunResumed(**wf.core.at(), state=where, recovered=()))
        return
    core = wf.core
    where = core.state.state
    if request.budget is not None:
        held = core.state.budget or Budget()
        core.state = core.state.evolve(budget=held.raised(request.budget))
    if where == AgentLoop.paused.id:
        await loop.pausing.unpause(actor=request.actor)
        await wf.children.pausing.resume(core.state, request.actor)
    elif where == AgentLoop.budget_exceeded.id:
        try:
            await loop.limits.raised(actor=request.actor)
        except RunNotResumable as exc:  # the validator said it could: kept over, and said why
            core.log.warning("resume_refused", error=str(exc))
            await core.save()
            return
        await wf.children.raising.resume(wf.store, core.state.run_id, request.actor)
    await core.emit(RunResumed(**core.at(), state=where, recovered=()))


async def _phase_raised(wf: RunWorkflow, request: ResumeRunRequest) -> None:
    """A flow resting with its agent phase's run at the budget: the budget raised, the flow
    back in its phase (as a local flow's resume does: `raise_budget`), and the raised budget
    sent to the phase's run, which goes on (the flow waits for its next report)."""
    core = wf.core
    where = core.state.state
    if request.budget is not None:
        held = core.state.budget or Budget()
        core.state = core.state.evolve(budget=held.raised(request.budget))
    try:
        await raise_budget(core, wf.store, request.actor)
    except RunNotResumable as exc:  # the validator said it could: kept over, and said why
        core.log.warning("resume_refused", error=str(exc))
        await core.save()
        return
    await core.save()
    await wf.children.raising.resume(wf.store, core.state.run_id, request.actor)
    await core.emit(RunResumed(**core.at(), state=where, recovered=()))


async def wait_woken(wf: RunWorkflow) -> None:
    """Wait until something arrives for the run, or its waiting calls' earliest deadline
    passes (a durable timer): then their expiries are queued, once. A pause asked before the
    run came to wait is dropped, as a local run's is (a run that waits stays as it is)."""
    if wf.core.state.status != "running":
        wf.store.pause_request = None
    at = next_deadline(wf)
    if at is None or not workflow.patched(DEADLINE_TIMERS):
        await workflow.wait_condition(wf.woken)
        return
    left = at - workflow_clock()
    if left > 0:
        try:
            await workflow.wait_condition(wf.woken, timeout=left, timeout_summary="deadline")
            return
        except TimeoutError:
            pass
    await expire_due(wf)


def next_deadline(wf: RunWorkflow) -> float | None:
    """The earliest deadline of the run's waiting calls with no decision queued or arrived."""
    state = wf.core.state
    if state.state != AgentLoop.awaiting_approval.id or wf.loop() is None:
        return None
    arrived = {q.call_id for q in wf.arrived}
    ats = [
        c.deadline.at
        for c in due(state, float("inf"))
        if c.deadline is not None and c.call_id not in arrived
    ]
    return min(ats, default=None)


async def expire_due(wf: RunWorkflow) -> None:
    """Queue the expiry of every due call (actor `deadline`) as an arrived decision, applied
    at the next step boundary through the one decision path; escalate those that escalate."""
    core, now = wf.core, workflow_clock()
    arrived = {q.call_id for q in wf.arrived}
    escalations = 0
    for call in due(core.state, now):
        if call.call_id in arrived:
            continue
        to = escalated_to(call)
        if to is not None:
            core.state = core.state.replace_call(escalated(call, to))
            escalations += 1
            continue
        queued = QueuedDecision(
            call_id=call.call_id, decision=expiry_decision(call), actor=DEADLINE, at=now
        )
        wf.arrived.append(queued)
    if escalations:
        core.log.info("deadline_escalated", calls=escalations)
        await core.save()


def rests(state: RunState) -> bool:
    """Whether the run rests until someone acts: after a model error, or over its budget."""
    return state.state in (AgentLoop.model_failed.id, AgentLoop.budget_exceeded.id)
