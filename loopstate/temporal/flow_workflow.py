"""`FlowWorkflow`: a flow run as a Temporal workflow, with the guarantees of an agent's.

The flow's machine and its `FlowSteps` run inside the workflow on a `RunCore`, as in a local
run: its gates (the machine's guards), code phases (`action`) and `on_enter` steps are
workflow code; each model phase's loop calls its model and runs its approved tools as
activities (addressed `FLOW/PHASE`, see `catalog`); an agent phase's agent runs as a child
workflow (`children`). A phase that waits for the user waits durably for the Update `reply`
(validated at once: the run must wait for the user, and the text pass the entry rule);
approvals arrive as for an agent (`decide`, `abort`, `retry`: see `runs_base`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from temporalio import workflow

from loopstate.engine.core import RunCore, RunPorts
from loopstate.engine.errors import DefinitionError, RunNotResumable
from loopstate.engine.logs import get_logger
from loopstate.engine.options import RunOptions
from loopstate.engine.outside import outside_text
from loopstate.engine.tool import Tool
from loopstate.machines.agent.steps import LoopSteps, Recorded, ToolRunner
from loopstate.machines.flows.driver import FlowConfig, FlowSteps
from loopstate.machines.flows.machine import flow_table
from loopstate.machines.flows.phase import BoundPhase
from loopstate.machines.flows.result import FlowResult
from loopstate.temporal.catalog import served_flow
from loopstate.temporal.children import ChildWorkflows
from loopstate.temporal.data import FLOW_WORKFLOW, ReplyRequest, RunSettings, StartFlow
from loopstate.temporal.pausable import PausableRun
from loopstate.temporal.ports import (
    ActivityModel,
    ActivityTools,
    ReplaySafeLog,
    WorkflowStore,
    workflow_clock,
)
from loopstate.temporal.publish import Publisher
from loopstate.temporal.workflow import retry_of


@workflow.defn(name=FLOW_WORKFLOW, failure_exception_types=[DefinitionError])
class FlowWorkflow(PausableRun):
    """A flow run: `StartFlow` names the served flow; fails at once (not in task retries)
    when the worker serves no flow of that name."""

    @workflow.init
    def __init__(self, start: StartFlow) -> None:
        flow = served_flow(start.flow)
        self.start = start
        self.flow = flow
        run_id, now = workflow.info().workflow_id, workflow_clock()
        if (state := start.state) is None:  # a new run keeps the flow's budget and rules
            opened = flow.opening(start.message, data=start.data, run_id=run_id, now=now)
            state = opened.evolve(budget=flow.options.budget, rules=flow.options.rules)
        self.store = store = WorkflowStore()
        store.state = state
        log = ReplaySafeLog(get_logger())
        o = flow.options
        options = RunOptions(
            store=store, auto_approve=o.auto_approve, workspace=o.workspace, deps=o.deps,
            clock=workflow_clock, log=log,
        )  # fmt: skip
        self.children = ChildWorkflows(start.flow, store, start.settings, None)
        self.phases = {
            n: _on_activities(start.flow, b, start.settings) for n, b in flow.phases.items()
        }
        config = FlowConfig(
            machine=flow.machine,
            phases=self.phases,
            options=options,
            table=flow_table(flow.machine),
            data=flow.data,
            tool_runners=self._tool_runner,
            recorded=self._recorded,
            child_runner=self.children,
        )
        ports = RunPorts(store=store, clock=workflow_clock, owner="workflow", lease_s=0, log=log)
        self.core = RunCore(state, ports)
        self.flow_steps = self.stepper = FlowSteps(self.core, config)
        self.continue_after = start.settings.continue_after_steps
        self.publisher = Publisher(start.flow, start.settings.search_attributes)
        self.reply_request: ReplyRequest | None = None
        self.setup(state, start.children)

    @workflow.run
    async def run(self, start: StartFlow) -> FlowResult:
        await self.drive(start.state is None, self.flow.model_names())
        return FlowResult.of(self.core.state, tuple(self.core.events))

    def _tool_runner(self, phase: str) -> ToolRunner:
        bound = self.phases[phase]
        return ActivityTools(f"{self.start.flow}/{phase}", bound.tools, self.start.settings)

    def _recorded(self, phase: str) -> Recorded | None:
        """The phase's calls as its model activity classified them (see `AgentWorkflow`)."""
        model = self.phases[phase].model
        if not isinstance(model, ActivityModel):
            return None
        model.classifying = lambda: self.core.state
        return model.recorded

    def loop(self) -> LoopSteps | None:
        bound = self.phases.get(self.core.state.phase or "")
        if bound is None or bound.agent is not None or bound.spec.action is not None:
            return None
        return self.flow_steps.loop

    def tools(self) -> Mapping[str, Tool]:
        bound = self.phases.get(self.core.state.phase or "")
        return bound.tools if bound is not None else {}

    def carried(self) -> StartFlow:
        known = tuple(self.store.children.values())
        return self.start.evolve(message="", data={}, state=self.core.state, children=known)

    def woken(self) -> bool:
        return self.reply_request is not None or super().woken()

    async def take_arrived(self) -> None:
        """The user's reply first (the phase's loop starts a new turn), then decisions."""
        request, self.reply_request = self.reply_request, None
        if request is not None:
            self.flow_steps.user_replied(request.message, actor=request.actor)
            await self.core.save()
        await super().take_arrived()

    # -- the user's reply --------------------------------------------------------------------

    @workflow.update(name="reply")
    def reply(self, request: ReplyRequest) -> None:
        """The user's next message to a phase that waits for it."""
        self.reply_request = request

    @reply.validator
    def _validate_reply(self, request: ReplyRequest) -> None:
        state = self.core.state
        if state.status != "awaiting_input" or self.reply_request is not None:
            raise RunNotResumable(
                f"run {state.run_id} is {state.status}, not waiting for the user's message"
            )
        if not request.message.strip():
            raise RunNotResumable(f"run {state.run_id}: the message is empty; say something")
        outside_text(request.message)  # the entry rule: refused here, not when applied


def _on_activities(flow: str, bound: BoundPhase, settings: RunSettings) -> BoundPhase:
    """A model phase whose model is called as an activity (its retry policy Temporal's)."""
    if bound.model is None:
        return bound
    model = ActivityModel(f"{flow}/{bound.name}", bound.model.name, settings, retry_of(bound.model))
    return replace(bound, model=model)
