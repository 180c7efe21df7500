"""The one start/resume protocol every kind of run follows (`Agent` and `Flow`; a Temporal
workflow opens its run from the same `opening_state`). A kind of run (`RunKind`) adds only
how it checks what it is given, builds its stepper and routes what a resume brings:

    start:   the kind's session (toolsets) → opening state created under a lease →
             run_started → hooks told (on_run_start, run_metadata kept) → drive
    resume:  lease, the kind's session → a queued message taken → check → the run's
             definition against the kind's (`engine/pinning`: compatible, migrated, or
             `IncompatibleRun` before anything changed) → recover, then route decisions,
             results and a message (the kind's `route`) → run_resumed → hooks told → drive

A run records at start the fingerprint of its `Definition` (the kind's `pin`), kept once in
the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from loopstate.engine.approval import as_result
from loopstate.engine.budget import Budget
from loopstate.engine.compat import Pin
from loopstate.engine.core import RunCore, RunPorts, Stepper
from loopstate.engine.events import RunResumed, RunStarted
from loopstate.engine.hooks import Hooks, announce_start
from loopstate.engine.messages import Message
from loopstate.engine.options import RunOptions, hook_chain
from loopstate.engine.pinning import Judgement, Pinning, judge
from loopstate.engine.state import FlowPosition, ParentLink, RunState
from loopstate.engine.store import lease_owner

S = TypeVar("S", bound=Stepper)


@dataclass(frozen=True)
class Given:
    """What a resume brings: decisions by call id (external tools' results among them, as
    `Result`), the user's message, who gives them, and whether the run's parent resumes it."""

    decisions: Mapping[str, Any] | None = None
    message: str | None = None
    actor: str = "resume"
    as_child: bool = False
    budget: Budget | None = None
    """Limits to raise (or set): those it names replace the run's (`Budget.raised`)."""

    @classmethod
    def of(
        cls,
        decisions: Mapping[str, Any] | None,
        results: Mapping[str, Any] | None,
        message: str | None,
        actor: str,
        budget: Budget | None = None,
    ) -> Given:
        if results:
            decisions = {**(decisions or {}), **{c: as_result(v) for c, v in results.items()}}
        return cls(decisions=decisions, message=message, actor=actor, budget=budget)


class RunKind(Protocol, Generic[S]):
    """What a kind of run adds to the protocol."""

    def stepper(self, core: RunCore) -> S:
        """The run's stepper over `core` (its machine positioned at the stored state)."""

    def check(self, state: RunState, given: Given) -> None:
        """Refuse (`RunNotResumable`, `DecisionError`) what this run cannot take."""

    async def route(self, stepper: S, given: Given) -> tuple[str, ...]:
        """Recover calls a crash interrupted, then apply what `given` brings; returns the
        recovered call ids."""

    def position(self, state: RunState) -> str:
        """Where the run stands, as `run_resumed` reports it."""

    def pin(self, state: RunState) -> Pin:
        """The definition the run is started with, or checked against at resume."""

    def session(self) -> AbstractAsyncContextManager[None]:
        """What the run holds while it is driven (an agent's toolsets, e.g. MCP sessions)."""

    async def begin(self, stepper: S) -> None:
        """A new run's first act before it is driven (an agent's given calls taken)."""


def opening_state(
    *,
    run_id: str,
    machine: str,
    machine_version: int,
    messages: tuple[Message, ...],
    now: float,
    parent: ParentLink | None = None,
    flow: FlowPosition | None = None,
    tenant: str | None = None,
) -> RunState:
    """A new run's state, before its first step: the one place a run is opened. `tenant`:
    kept in its `metadata` (the HTTP service shows the run to that tenant only)."""
    return RunState(
        run_id=run_id,
        machine=machine,
        machine_version=machine_version,
        messages=messages,
        flow=flow,
        created_at=now,
        updated_at=now,
        parent=parent,
        metadata={} if tenant is None else {"tenant": tenant},
    )


class RunProtocol(Generic[S]):
    """Starts and resumes the runs of one kind with one set of options."""

    def __init__(self, options: RunOptions, kind: RunKind[S]) -> None:
        self.options = options
        self.kind = kind
        self.pinning = Pinning(options.store)

    async def start(self, state: RunState, *, model: str, feed: Hooks | None = None) -> RunCore:
        """Create `state` (an `opening_state`) and drive it until it ends or waits."""
        o, owner = self.options, lease_owner()
        if o.budget is not None and state.budget is None:
            state = state.evolve(budget=o.budget)
        if o.rules:
            state = state.evolve(rules=o.rules)
        async with self.kind.session():
            definition = await self.pinning.keep(self.kind.pin(state))
            state = state.evolve(definition=definition)
            await o.store.create(state, owner=owner, now=state.created_at, ttl=o.lease_s)
            core = self.core(state, owner, feed)
            stepper = self.kind.stepper(core)
            async with core.holding():
                await core.emit(RunStarted(**core.at(), machine=state.machine, model=model))
                core.state = await announce_start(self.options.hooks, core.state)
                await self.kind.begin(stepper)
                await core.drive(stepper)
        return core

    async def resume(
        self,
        run_id: str,
        given: Given,
        *,
        owner: str | None = None,
        feed: Hooks | None = None,
        drain: asyncio.Event | None = None,
    ) -> RunCore:
        """Continue the stored run `run_id` with what `given` brings; `owner` is the lease
        owner to resume under, `drain` stops it after its current step once set."""
        o, owner = self.options, owner or lease_owner()
        state = await o.store.acquire(run_id, owner=owner, now=o.clock(), ttl=o.lease_s)
        # this resume continues the waiting child; the rules it keeps are the agent's now
        state = state.evolve(child_ready=False, rules=o.rules or state.rules)
        core = self.core(state, owner, feed)
        async with core.holding(), self.kind.session():
            given = _take_queued_message(core, given)
            self.kind.check(core.state, given)
            if given.budget is not None:
                held = core.state.budget or Budget()
                core.state = core.state.evolve(budget=held.raised(given.budget))
            await self._settle(core, given)
            stepper = self.kind.stepper(core)
            where = self.kind.position(core.state)
            recovered = await self.kind.route(stepper, given)
            await core.emit(RunResumed(**core.at(), state=where, recovered=recovered))
            core.state = await announce_start(self.options.hooks, core.state)
            await core.drive(stepper, drain=drain)
        return core

    async def _settle(self, core: RunCore, given: Given) -> None:
        """The run under this kind's definition (`Pinning.settle`); a change is logged."""
        pin, kept = self.kind.pin(core.state), len(core.state.redefinitions)
        at = self.options.clock()
        core.state = await self.pinning.settle(
            core.state, pin, given.decisions, at=at, by=given.actor
        )
        for record in core.state.redefinitions[kept:]:
            core.log.info(
                "run_redefined", before=record.before, after=record.after,
                migration=record.migration, changes=list(record.changes),
            )  # fmt: skip

    async def verdict(self, run_id: str) -> Judgement:
        """Whether the stored run `run_id` would resume under this definition, and why (the
        check `resume` makes; nothing is changed)."""
        state = await self.options.store.load(run_id)
        async with self.kind.session():
            before = await self.pinning.recorded(state.definition)
            return judge(state, before, self.kind.pin(state))

    def core(self, state: RunState, owner: str, feed: Hooks | None = None) -> RunCore:
        o = self.options
        hooks = o.hooks if feed is None else hook_chain([*(o.hooks.hooks if o.hooks else ()), feed])
        ports = RunPorts(
            store=o.store, clock=o.clock, owner=owner, lease_s=o.lease_s, hooks=hooks, log=o.log
        )
        return RunCore(state, ports)


def _take_queued_message(core: RunCore, given: Given) -> Given:
    """A message queued on the stored run (`queue_message`) for a run that answered: this
    resume takes it, unless it brings one of its own."""
    state = core.state
    answered = "awaiting_input" if state.flow is not None else "done"
    if given.message is not None or state.status != answered or not state.queued_message:
        return given
    core.state = state.evolve(queued_message=None)
    return replace(given, message=state.queued_message)
