"""`AgentWorkflow`: an agent run as a Temporal workflow, driven by the engine itself.

The `AgentLoop` machine and its `LoopSteps` run inside the workflow on a `RunCore`, exactly as
in a local run; only the ports differ (`loopstate.temporal.ports`). Decisions arrive by Update
(validated at once, by the checker a local run uses) or by Signal (checked when applied), and
are applied at a step boundary through the one decision path (`Decisions.queued`); see
`runs_base` for the run loop every loopstate workflow shares. A sub-agent's call runs as a
child workflow of this one (`children`), and so does a flow's agent phase (its `StartRun`
names the child's address and its `parent`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from temporalio import workflow

from loopstate.engine.core import RunCore, RunPorts
from loopstate.engine.errors import DefinitionError
from loopstate.engine.logs import get_logger
from loopstate.engine.models.retry import RetryingModel
from loopstate.engine.models.retry import RetryPolicy as ModelRetry
from loopstate.engine.options import RunOptions
from loopstate.engine.protocol import opening_state
from loopstate.engine.result import RunResult
from loopstate.engine.state import RunState
from loopstate.engine.tool import Tool
from loopstate.machines.agent.agent import Agent
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.agent.resuming import opening_messages
from loopstate.machines.agent.steps import LoopSteps
from loopstate.temporal.catalog import served
from loopstate.temporal.children import ChildWorkflows
from loopstate.temporal.data import WORKFLOW, StartRun
from loopstate.temporal.pausable import PausableRun
from loopstate.temporal.ports import (
    ActivityModel,
    ActivityTools,
    ReplaySafeLog,
    WorkflowStore,
    workflow_clock,
)
from loopstate.temporal.publish import Publisher


@workflow.defn(name=WORKFLOW, failure_exception_types=[DefinitionError])
class AgentWorkflow(PausableRun):
    """An agent run: `StartRun` names the served agent (or a sub-agent's address); fails at
    once (not in task retries) when the worker serves no agent there."""

    @workflow.init
    def __init__(self, start: StartRun) -> None:
        agent = served(start.agent)
        self.start = start
        settings = start.settings
        state = start.state or _opening(agent, start)
        self.store = store = WorkflowStore()
        store.state = state
        store.above = {s.run_id: s for s in start.above}
        log = ReplaySafeLog(get_logger())
        options = RunOptions(
            store=store,
            auto_approve=agent.options.auto_approve,
            workspace=agent.options.workspace,
            clock=workflow_clock,
            log=log,
        )
        self.children = ChildWorkflows(start.agent, store, settings, start.parent)
        model = ActivityModel(start.agent, agent.model.name, settings, retry_of(agent.model))
        model.classifying = lambda: self.core.state  # replays never classify calls again
        config = dataclasses.replace(
            agent._loop,  # the agent's own loop configuration, with the workflow's ports
            model=model,
            recorded=model.recorded,
            options=options,
            deps=None,
            tool_runner=ActivityTools(start.agent, agent._loop.tools, settings),
            child_runner=self.children,
        )
        ports = RunPorts(store=store, clock=workflow_clock, owner="workflow", lease_s=0, log=log)
        self.core = RunCore(state, ports)
        self.agent_loop = self.stepper = LoopSteps(self.core, config)
        self.continue_after = settings.continue_after_steps
        self.publisher = Publisher(start.agent, settings.search_attributes)
        self.setup(state, start.children)

    @workflow.run
    async def run(self, start: StartRun) -> RunResult:
        await self.drive(start.state is None, self.agent_loop.config.model.name)
        return RunResult.of(self.core.state, tuple(self.core.events))

    def loop(self) -> LoopSteps:
        return self.agent_loop

    def tools(self) -> Mapping[str, Tool]:
        return self.agent_loop.config.tools

    def carried(self) -> StartRun:
        known = tuple(s for s in self.store.children.values())
        return self.start.evolve(prompt="", state=self.core.state, children=known)


def _opening(agent: Agent, start: StartRun) -> RunState:
    """The run's opening state, as a local agent run opens it (its budget and rules kept; a
    child run's budget is its parent's, over the tree)."""
    o = agent.options
    state = opening_state(
        run_id=workflow.info().workflow_id,
        machine="agent",
        machine_version=AgentLoop.machine_version,
        messages=opening_messages(agent.instructions, start.prompt),
        now=workflow_clock(),
        parent=start.parent,
    )
    return state.evolve(budget=start.budget or o.budget, rules=o.rules)


def retry_of(model: object) -> ModelRetry | None:
    """The agent's own retry policy (`Agent(..., retry=...)`), for Temporal to apply."""
    return model.policy if isinstance(model, RetryingModel) else None
