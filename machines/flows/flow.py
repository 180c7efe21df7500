"""`Flow`: a flow machine, its phases and its ports, behind `run`, `resume` and `abort`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from statemachine import StateChart

from loopstate.engine.approval import ApprovalRequest, Approver, Decision, SyncApprover
from loopstate.engine.budget import Budget
from loopstate.engine.clock import Clock, IdSource, random_ids, system_clock
from loopstate.engine.compat import OnChange
from loopstate.engine.core import RunCore
from loopstate.engine.errors import DefinitionError
from loopstate.engine.fork import fork_run
from loopstate.engine.hooks import Hooks
from loopstate.engine.messages import UserMessage
from loopstate.engine.migration import Migration
from loopstate.engine.model import Model
from loopstate.engine.models.retry import RetryPolicy
from loopstate.engine.operations import abort_run
from loopstate.engine.options import RunOptions
from loopstate.engine.outside import OutsideError, outside, outside_text
from loopstate.engine.pinning import Judgement
from loopstate.engine.protocol import Given, RunProtocol, opening_state
from loopstate.engine.rule import Rule
from loopstate.engine.run_stream import RunStream
from loopstate.engine.state import FlowPosition, RunState
from loopstate.engine.store import DEFAULT_LEASE_S, Store, lease_owner
from loopstate.engine.sync import blocking, refuse_in_loop
from loopstate.engine.tree import (
    UsageReport,
    pending_tree,
    run_tree,
    usage_report,
    waits_on_child,
)
from loopstate.machines.agent.agent import as_model
from loopstate.machines.flows.driver import FlowConfig
from loopstate.machines.flows.kind import FlowKind, check_flow
from loopstate.machines.flows.machine import check_machine, flow_table
from loopstate.machines.flows.phase import BoundPhase, FlowData, Phase
from loopstate.machines.flows.pinned import FlowPins
from loopstate.machines.flows.result import FlowResult
from loopstate.machines.flows.typed import check_data_model, misfit, typed_tools


class Flow:
    """A multi-phase run: `machine` (a `FlowMachine` subclass) owns the phases and the gates
    between them; `phases` says what each phase asks of its model.

    Models are routed per phase: `models[phase]`, else the phase's own `model`, else
    `models["default"]`, else `model`. A name is a litellm model name; a `Model` is used as is.
    Runs are kept in `store` (default: `SQLiteStore` at `.loopstate/runs.db`) and resume in any
    process that uses the same store: after approvals with `decisions=`, after a pause for the
    user with `message=`. `data` (a pydantic model) declares what the flow collects: gates name
    the fields they read (`@reads`), checked here; tools' updates, outputs and the starting
    data must fit it; a gate whose field is absent stays closed (see `machines/flows/typed`).
    `max_steps` caps the model calls of the whole run, over all its
    phases (a phase's own `max_steps` counts one turn of it) and its agent phases' child runs
    and their sub-agents: the phase that reaches it ends its turn, and the flow ends `failed`
    with stop reason `max_steps` (see `machines/flows/step_cap`). `budget` limits each
    run as `Agent(budget=)` does. `rules` gate and forbid calls as `Agent(rules=)` does, in
    the flow's own phases and in its agent phases' runs and their sub-agents (with each
    agent's own rules: the stricter wins, see `Rule`).
    """

    def __init__(
        self,
        machine: type[StateChart[Any]],
        phases: Mapping[str, Phase],
        *,
        data: type[BaseModel] | None = None,
        name: str | None = None,
        model: str | Model | None = None,
        models: Mapping[str, str | Model] | None = None,
        approver: Approver | SyncApprover | None = None,
        auto_approve: bool = False,
        hooks: Hooks | Sequence[Hooks] | None = None,
        store: Store | None = None,
        workspace: str | Path | None = None,
        deps: Any = None,
        ask_again_after_crash: bool = False,
        clock: Clock = system_clock,
        ids: IdSource = random_ids,
        lease_s: float = DEFAULT_LEASE_S,
        retry: RetryPolicy | None = None,
        log: Any = None,
        budget: Budget | None = None,
        rules: Sequence[Rule] = (),
        max_steps: int | None = None,
        version: str | None = None,
        on_change: OnChange | Mapping[str, OnChange] | None = None,
        migrations: Sequence[Migration] = (),
    ) -> None:
        self._options: dict[str, Any] = {
            k: v for k, v in locals().items() if k not in ("self", "__class__")
        }
        self.initial = check_machine(machine, phases)
        routes = dict(models or {})
        unknown = set(routes) - set(phases) - {"default"}
        if unknown:
            raise DefinitionError(f"models for phases that do not exist: {sorted(unknown)}")
        self.machine = machine
        self.name = name or machine.__name__.lower()
        self.phases = {
            phase_name: BoundPhase.build(
                phase_name,
                spec,
                _resolve(
                    routes.get(phase_name) or spec.model or routes.get("default") or model, retry
                ),
            )
            for phase_name, spec in phases.items()
        }
        self.data = data
        if data is not None:
            check_data_model(data, machine, self.phases)
            self.phases = {n: typed_tools(b, data) for n, b in self.phases.items()}
        self.options = RunOptions.of(self._options)
        self.store: Store = self.options.store
        self.clock = clock
        self.ids = ids
        if max_steps is not None and max_steps < 1:
            raise DefinitionError("max_steps must be at least 1")
        self._config = FlowConfig(
            machine=machine,
            phases=self.phases,
            options=self.options,
            table=flow_table(machine),
            data=data,
            max_steps=max_steps,
        )
        pins = FlowPins(self.name, machine, self.phases, version, on_change, migrations)
        self.definition = pins.definition  # what its runs are pinned to (`Agent.definition`)
        self._protocol = RunProtocol(self.options, FlowKind(self, pins))

    async def check_run(self, run_id: str) -> Judgement:
        """Whether the stored run would resume under this flow (see `Agent.check_run`)."""
        return await self._protocol.verdict(run_id)

    def clone(self, **changes: Any) -> Flow:
        """A new flow with the same configuration but for `changes` (any `__init__` argument),
        e.g. `flow.clone(store=MemoryStore())`."""
        unknown = set(changes) - set(self._options)
        if unknown:
            raise DefinitionError(f"Flow has no options {sorted(unknown)}")
        options = {**self._options, **changes}
        return Flow(options.pop("machine"), options.pop("phases"), **options)

    async def run(
        self,
        message: str,
        *,
        data: FlowData | None = None,
        run_id: str | None = None,
        tenant: str | None = None,
    ) -> FlowResult:
        """Start a run with the user's first message (and any data known up front); `tenant`
        as for `Agent.run`."""
        return await self._run(message, data, run_id, None, tenant=tenant)

    def stream(
        self, message: str, *, data: FlowData | None = None, run_id: str | None = None
    ) -> RunStream[FlowResult]:
        """`run`, streamed as `Agent.stream` is: `async for event in flow.stream(message)`
        yields the run's events, the phases' model deltas among them, and a `phase_changed`
        event each time the flow enters a phase (the first at the start); `.result` is the
        `FlowResult` once the iteration ends."""
        return RunStream(lambda feed: self._run(message, data, run_id, feed))

    def stream_resume(
        self,
        run_id: str,
        *,
        message: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        results: Mapping[str, Any] | None = None,
        actor: str = "resume",
    ) -> RunStream[FlowResult]:
        """`resume`, streamed, as `stream` is `run`."""
        given = Given.of(decisions, results, message, actor)
        return RunStream(lambda feed: self._resume(run_id, given, feed=feed))

    def run_sync(
        self, message: str, *, data: FlowData | None = None, run_id: str | None = None
    ) -> FlowResult:
        """`run` for code that is not async (the rules of `Agent.run_sync`: refused inside a
        running event loop; interrupted, the run stays where it was saved)."""
        refuse_in_loop("flow.run(...)")
        run_id = run_id or self.ids()
        coroutine = self.run(message, data=data, run_id=run_id)
        return blocking(coroutine, instead="flow.run(...)", run_id=run_id)

    def resume_sync(
        self,
        run_id: str,
        *,
        message: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        actor: str = "resume",
    ) -> FlowResult:
        """`resume` for code that is not async (same rules as `run_sync`)."""
        refuse_in_loop("flow.resume(...)")
        coroutine = self.resume(run_id, message=message, decisions=decisions, actor=actor)
        return blocking(coroutine, instead="flow.resume(...)", run_id=run_id)

    async def _run(
        self,
        message: str,
        data: FlowData | None,
        run_id: str | None,
        feed: Hooks | None,
        *,
        tenant: str | None = None,
    ) -> FlowResult:
        state = self.opening(
            message, data=data, run_id=run_id or self.ids(), now=self.clock(), tenant=tenant
        )
        core = await self._protocol.start(state, model=self.model_names(), feed=feed)
        return await self._result(core)

    def opening(
        self,
        message: str,
        *,
        data: FlowData | None,
        run_id: str,
        now: float,
        tenant: str | None = None,
    ) -> RunState:
        """A new run's opening state (a Temporal workflow opens its run with it too)."""
        first = self.phases[self.initial].spec
        start = outside(dict(data or {}))  # the entry rule for outside data (engine/outside)
        if self.data is not None and (why := misfit(self.data, start)) is not None:
            raise OutsideError("data", f"does not fit {self.data.__name__}: {why}")
        return opening_state(
            run_id=run_id,
            machine=self.name,
            machine_version=getattr(self.machine, "machine_version", 1),
            messages=(UserMessage(content=outside_text(message)),),
            flow=FlowPosition(
                phase=self.initial, data=first.on_enter(start) if first.on_enter else start
            ),
            now=now,
            tenant=tenant,
        )

    async def resume(
        self,
        run_id: str,
        *,
        message: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        results: Mapping[str, Any] | None = None,
        actor: str = "resume",
        owner: str | None = None,
        drain: asyncio.Event | None = None,
        budget: Budget | None = None,
    ) -> FlowResult:
        """Continue a suspended or interrupted run where it stopped: with the user's `message`
        when it waits for input, with `decisions` (by call id) when it waits for approval,
        with `results` (by call id) for its external tools' calls (`Result`). `owner` is the
        lease owner to resume under (a worker that claimed the run). `budget` raises the
        run's limits (see `Agent.resume`)."""
        given = Given.of(decisions, results, message, actor, budget)
        return await self._resume(run_id, given, owner=owner, drain=drain)

    async def _resume(
        self,
        run_id: str,
        given: Given,
        *,
        owner: str | None = None,
        drain: asyncio.Event | None = None,
        feed: Hooks | None = None,
    ) -> FlowResult:
        core = await self._protocol.resume(run_id, given, owner=owner, drain=drain, feed=feed)
        return await self._result(core)

    async def pending(self, run_id: str) -> list[ApprovalRequest]:
        """What waits for a decision in the stored run `run_id` and every child run it started
        (its agent phases' and their sub-agents'; each request names its `run_id`)."""
        return await pending_tree(self.store, run_id)

    async def usage(self, run_id: str) -> UsageReport:
        """The stored run's usage: its own, the total with its child runs', and per agent (an
        agent phase's by the phase's name)."""
        return usage_report(await run_tree(self.store, run_id))

    async def fork(
        self,
        run_id: str,
        *,
        at: int,
        message: str | None = None,
        replace_result: Mapping[str, str] | None = None,
        replace_message: tuple[int, str] | None = None,
        actor: str = "user",
    ) -> str:
        """The id of a new flow run whose past is run `run_id`'s up to transition `at`, copied
        with no model or tool call (see `Agent.fork`); continue it with `resume`. A flow whose
        agent phases ran in child runs at `at` is refused (`ForkRefused`)."""
        state = await self.store.load(run_id)
        check_flow(state, self.name)
        o = self.options
        fork = await fork_run(
            o.store, run_id, at=at, new_id=self.ids(), by=actor, clock=self.clock,
            owner=lease_owner(), lease_s=o.lease_s, message=message,
            replace_result=replace_result, replace_message=replace_message,
        )  # fmt: skip
        return fork.run_id

    async def abort(self, run_id: str, reason: str, *, actor: str = "user") -> FlowResult:
        """End a suspended (or interrupted) run in `aborted`: no further model call or tool."""
        state = await self.store.load(run_id)
        check_flow(state, self.name)
        ended = await abort_run(self.store, run_id, reason, actor=actor, clock=self.clock)
        return FlowResult.of(await self.store.load(ended.run_id))

    async def _result(self, core: RunCore) -> FlowResult:
        """What `run`/`resume` return; a flow that waits for an agent phase's run lists the
        calls that run (and its own sub-agents) wait for."""
        result = FlowResult.of(core.state, tuple(core.events))
        if waits_on_child(core.state):
            pending = await pending_tree(self.store, core.state.run_id)
            result = result.model_copy(update={"pending": tuple(pending)})
        return result

    def model_names(self) -> str:
        """The phases' model names, as `run_started` reports them."""
        names = dict.fromkeys(p.model.name for p in self.phases.values() if p.model is not None)
        return ",".join(names)


def _resolve(model: str | Model | None, retry: RetryPolicy | None) -> Model | None:
    return None if model is None else as_model(model, retry)
