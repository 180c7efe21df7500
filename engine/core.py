"""The skeleton every kind of run shares; the agent loop and the flow add only their steps.

`RunCore` owns one run while a process drives it: its state and what the store holds of it,
recording and announcing transitions, emitting and logging events, the lease (renewed while
the run works, released when it stops), the error policy and the run's ending. A kind of run
is a `Stepper`: it performs one step of its machine at a time and says how its machine ends.

    drive(stepper):  while not ended: step()      (False: the run waits → run_suspended)
                     CancelledError → unchanged    re-raised: interrupted, not ended
                     DecisionError  → unchanged    re-raised: the caller hears why
                     other errors   → end(fail)    from the state the store holds
                     finally        → run_finished (if ended), on_run_end, lease released
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, Protocol

from loopstate.engine.clock import Clock
from loopstate.engine.errors import DecisionError, LoopstateError, RunBusy
from loopstate.engine.events import (
    Event,
    PhaseChanged,
    RunFinished,
    RunSuspended,
    TransitionEvent,
)
from loopstate.engine.failure import failure_of
from loopstate.engine.hooks import HookChain
from loopstate.engine.lease import LeaseKeeper
from loopstate.engine.logs import get_logger
from loopstate.engine.marks import mark_of
from loopstate.engine.state import RunState, Transition
from loopstate.engine.store import Store

P = ParamSpec("P")
Ending = Literal["fail", "abort"]

_INFO_EVENTS = frozenset(
    {"run_started", "run_resumed", "run_suspended", "run_finished", "tool_approval"}
)


@dataclass(frozen=True)
class Cause:
    """Why a transition happened and who caused it, as the audit trail records it."""

    reason: str | None = None
    actor: str | None = None


_NO_CAUSE = Cause()


@dataclass(frozen=True)
class RunPorts:
    """What the skeleton needs besides the run's state."""

    store: Store
    clock: Clock
    owner: str
    lease_s: float
    hooks: HookChain | None = None
    log: Any = None


class Positioned(Protocol):
    @property
    def current_state_value(self) -> Any: ...


class Stepper(Protocol):
    """A kind of run (the agent loop, a flow): its steps over the core's state."""

    def ended(self) -> bool:
        """Whether the run has stopped until someone acts: a final state, or a state such as
        the agent loop's `model_failed` that only a resume leaves."""

    async def step(self) -> bool:
        """Perform one step of the machine; False when the run must wait for someone."""

    def end(self, how: Ending, cause: Cause) -> None:
        """Move the machine(s) to `failed` or `aborted` (the core saves)."""

    def reset(self) -> None:
        """Reposition the machine(s) at the core's state (after it was rolled back)."""


class OnCore:
    """Base of a `Stepper`: its `state` is the core's (one run, one state, one owner)."""

    core: RunCore

    @property
    def state(self) -> RunState:
        return self.core.state

    @state.setter
    def state(self, value: RunState) -> None:
        self.core.state = value


def _enabled(log: Any, level: int) -> bool:
    check = getattr(log, "is_enabled_for", None)
    return True if check is None else bool(check(level))


class RunCore:
    """One run's state while a process drives it, and everything every kind of run does."""

    def __init__(self, state: RunState, ports: RunPorts) -> None:
        self.state = state
        self.saved = state
        """The run as the store holds it."""
        self._saving = asyncio.Lock()
        self.ports = ports
        self.hooks = ports.hooks
        self.events: list[Event] = []
        self.log = (ports.log or get_logger()).bind(run_id=state.run_id)
        self._log_debug = _enabled(self.log, logging.DEBUG)
        self._log_info = _enabled(self.log, logging.INFO)
        self._unannounced: list[Transition] = []

    # -- driving -----------------------------------------------------------------------------

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[None]:
        """Keep the run's lease while the block works (renewed every third of its length, so
        it expires only if this process stops), and release it at the end."""
        ports, run_id = self.ports, self.state.run_id
        keeper = LeaseKeeper(ports.store, run_id, ports.owner, ports.clock, ports.lease_s, self.log)
        try:
            yield
        finally:
            await keeper.stop()
            await ports.store.release(run_id, owner=ports.owner)

    async def drive(self, stepper: Stepper, *, drain: asyncio.Event | None = None) -> None:
        """Step until the run ends or waits, under the error policy; then finish. Once `drain`
        is set the run stops after its current step (saved, as every step is), still
        `running`, for any process to continue."""
        try:
            while not stepper.ended():
                if drain is not None and drain.is_set():
                    self.log.info("run_drained", state=self.state.state)
                    break
                if not await stepper.step():
                    await self.emit(RunSuspended(**self.at(), pending=self.pending_ids()))
                    break
        except asyncio.CancelledError:
            # Interrupted (Ctrl-C, SIGTERM, a cancelled task), not ended: the run stands where
            # its last save left it, as after a crash, and `resume` continues it. Only someone
            # asking aborts a run.
            self.log.info("run_interrupted", state=self.saved.state)
            raise
        except (DecisionError, RunBusy):
            raise  # a refused decision changes nothing; a lost lease means another writer
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, LoopstateError):  # expected: its message says it all
                self.log.error("run_failed", error=error.splitlines()[0])
            else:
                self.log.error("run_failed", exc_info=exc)
            if self.state is not self.saved:  # what was not saved did not happen
                self.state = self.saved
                stepper.reset()
            self.state = self.state.evolve(failure=failure_of(exc))
            await self.end(stepper, "fail", Cause(error, "system"), error=error)
        await self.finish(stepper)

    async def end(
        self,
        stepper: Stepper,
        how: Ending,
        cause: Cause,
        *,
        stop: str | None = None,
        error: str | None = None,
    ) -> None:
        """End the run in `failed` or `aborted` and save it; nothing if it has ended."""
        if stepper.ended():
            return
        if how == "abort":
            stop = stop if stop is not None else f"aborted: {cause.reason}"
            self.state = self.state.evolve(stop_reason=stop)
        else:
            self.state = self.state.evolve(error=error or self.state.error)
        stepper.end(how, cause)
        await self.save()

    async def finish(self, stepper: Stepper) -> None:
        """Tell the world the run ended, or stopped for now."""
        state = self.state
        if stepper.ended():
            await self.emit(
                RunFinished(
                    **self.at(),
                    status=state.status,
                    stop_reason=state.stop_reason,
                    error=state.error,
                )
            )
        if self.hooks is not None:
            await self.hooks.on_run_end(state)

    # -- recording ---------------------------------------------------------------------------

    def send(
        self,
        machine: Positioned,
        source: str,
        cause: Cause | None,
        event: Callable[P, object],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> str:
        """Send `event` (one of `machine`'s typed event methods), record the transition it
        made from `source`, and return the target state's value."""
        event(*args, **kwargs)
        target = str(machine.current_state_value)
        self.record(source, target, _event_id(event), cause)
        return target

    def record(self, source: str, target: str, event: str, cause: Cause | None) -> None:
        """Append a transition to the audit trail; it is announced once saved."""
        now = self.ports.clock()
        cause = cause or _NO_CAUSE
        if len(self.state.transitions) > len(self.saved.transitions):
            self.state = _marked(self.state)  # a second one before a save: mark the first now
        transition = Transition.trusted(
            seq=len(self.state.transitions) + 1,
            source=source,
            target=target,
            event=event,
            at=now,
            reason=cause.reason,
            actor=cause.actor,
        )
        self.state = self.state.evolve(
            transitions=self.state.transitions + (transition,),  # noqa: RUF005 (see _marked)
            updated_at=now,
        )
        self._unannounced.append(transition)

    async def save(self) -> None:
        """Save the run (the store appends what it lacks, renews the lease), then announce the
        transitions made since the last save. The latest of them is marked with the run's
        shape as saved (what a fork at it starts from)."""
        async with self._saving:  # one at a time: each starts from the revision the last left
            if len(self.state.transitions) > len(self.saved.transitions):
                self.state = _marked(self.state)
            state, before = self.state, self.saved
            saved = await self._write(state, before.revision)
            # What changed meanwhile (a tool of the batch finished) is ours: at the new revision
            self.state = (
                saved if self.state is state else self.state.evolve(revision=saved.revision)
            )
            self.saved = saved
            announce, self._unannounced = self._unannounced, []
        for t in announce:
            await self.emit(
                TransitionEvent.trusted(
                    **self.at(),
                    seq=t.seq,
                    source=t.source,
                    target=t.target,
                    event=t.event,
                    reason=t.reason,
                    actor=t.actor,
                )
            )
            if self.hooks is not None:
                await self.hooks.on_transition(t)
        await self._phase_changed(before, state, announce)

    async def _write(self, state: RunState, revision: int) -> RunState:
        """Save `state` as the copy of the run at `revision`, the one this process last read or
        saved (the store refuses it if anyone wrote the run since: `RunBusy`)."""
        if state.revision != revision:  # a copy kept from before our last save
            state = state.evolve(revision=revision)
        ports = self.ports
        return await ports.store.save(
            state, owner=ports.owner, now=ports.clock(), ttl=ports.lease_s
        )

    async def _phase_changed(
        self, before: RunState, state: RunState, announced: list[Transition]
    ) -> None:
        """A flow run that changed phase with this save says so (`phase_changed`)."""
        if before.phase == state.phase or state.phase is None:
            return
        moves = (
            t for t in reversed(announced) if (t.source, t.target) == (before.phase, state.phase)
        )
        reason = next((t.reason for t in moves), None)
        await self.emit(
            PhaseChanged(**self.at(), source=before.phase, target=state.phase, reason=reason)
        )

    async def emit(self, event: Event) -> None:
        """Keep `event` for the run's result, log it (one line), and hand it to the hooks."""
        self.events.append(event)
        info = event.kind in _INFO_EVENTS
        if self._log_info if info else self._log_debug:
            # structlog's first argument is named `event`: a transition's event logs as `trigger`.
            fields = {
                ("trigger" if k == "event" else k): v
                for k, v in event.__dict__.items()
                if k not in ("kind", "run_id")
            }
            (self.log.info if info else self.log.debug)(event.kind, **fields)
        if self.hooks is not None:
            await self.hooks.on_event(event)

    def at(self, step: int | None = None) -> dict[str, Any]:
        """The fields every event of this run carries."""
        return {
            "run_id": self.state.run_id,
            "at": self.ports.clock(),
            "step": self.state.steps if step is None else step,
        }

    def pending_ids(self) -> tuple[str, ...]:
        return tuple(c.call_id for c in self.state.batch if c.status == "awaiting")


def _marked(state: RunState) -> RunState:
    # Concatenation copies the history once; unpacking (RUF005) copies it into a list, then
    # into the tuple: a run's histories are copied at every step.
    transitions = state.transitions
    marked = transitions[-1].evolve(mark=mark_of(state))
    return state.evolve(transitions=transitions[:-1] + (marked,))  # noqa: RUF005


def _event_id(event: Callable[..., object]) -> str:
    name = getattr(event, "id", None) or getattr(event, "__name__", None)
    return str(name)
