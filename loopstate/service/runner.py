"""Who continues a run: this process starts the runs it is asked for, and resumes (through
`Worker`, under `Store.claim`) every run whose decisions are complete. Several server
processes on one store never drive the same run twice: a run is driven only under its lease.

A run started here carries its agent's name in its id (`name.hex`), so any server process
that has that agent can resume it, after a restart too.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from loopstate.engine.clock import Clock
from loopstate.engine.errors import RunNotResumable
from loopstate.engine.events import Event
from loopstate.engine.hooks import Hooks
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.engine.streaming import TextDelta, ToolCallDelta
from loopstate.service.fallback import with_fallback
from loopstate.worker import Worker

if TYPE_CHECKING:
    from loopstate.machines.agent import Agent
    from loopstate.machines.flows import Flow

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Signals(Hooks):
    """Tells the service when a run of this process was stored or moved."""

    def __init__(self, moved: asyncio.Event) -> None:
        self.moved = moved
        self.created: dict[str, asyncio.Event] = {}
        self.deltas: Callable[[TextDelta | ToolCallDelta], None] = lambda delta: None
        self.changed: Callable[[str, int | None], None] = lambda run_id, seq: moved.set()

    async def on_run_start(self, run: RunState) -> None:
        started = self.created.get(run.run_id)
        if started is not None:
            started.set()
        self.moved.set()

    async def on_event(self, event: Event) -> None:
        if event.kind == "transition":  # saved: the run's streams look again now, before
            self.changed(event.run_id, event.seq)  # the deltas of the step it starts


class StreamingSignals(Signals):
    """`Signals` that also hand on the model's streamed deltas (defining `on_text_delta`
    makes model calls stream, when the model can)."""

    async def on_text_delta(self, delta: TextDelta) -> None:
        self.deltas(delta)

    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None:
        self.deltas(delta)


class Runner:
    """The registered agents (by name), driving their runs on one store."""

    def __init__(
        self,
        agents: Mapping[str, Agent | Flow],
        store: Store,
        *,
        concurrency: int = 16,
        stream: bool = True,
    ) -> None:
        for name in agents:
            if not NAME.match(name):
                raise ValueError(f"agent name {name!r}: use letters, digits, _ and - only")
        self.moved = asyncio.Event()
        self.signals = (StreamingSignals if stream else Signals)(self.moved)
        self.agents = {name: _wired(a, store, self.signals) for name, a in agents.items()}
        self.store = store
        self.clock: Clock = next(iter(self.agents.values())).clock if agents else _now
        self.worker = Worker(self, concurrency=concurrency, poll_s=1.0)
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self, name: str, prompt: str, tenant: str | None = None) -> str:
        """Start a run of agent `name` (for `tenant`) in the background; return once it is
        stored."""
        run_id = f"{name}.{uuid.uuid4().hex}"
        await self._launch(run_id, self.agents[name].run(prompt, run_id=run_id, tenant=tenant))
        return run_id

    async def converse(self, run_id: str, text: str, actor: str) -> None:
        """Continue a run that answered with the user's next message, in the background;
        return once it holds the run (or raise why it cannot: `RunBusy`, `RunNotResumable`)."""
        agent = self._agent_of(run_id)
        await self._launch(run_id, agent.resume(run_id, message=text, actor=actor))

    async def retry(self, run_id: str, actor: str) -> None:
        """Call the model again for a run resting in `model_failed`, in the background."""
        agent = self._agent_of(run_id)
        await self._launch(run_id, agent.resume(run_id, actor=actor))

    async def _launch(self, run_id: str, work: Coroutine[Any, Any, Any]) -> None:
        """Drive `work` in the background; return when the run started (its `on_run_start`),
        raising what stopped it before that."""
        started = self.signals.created[run_id] = asyncio.Event()
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            waiting = asyncio.ensure_future(started.wait())
            await asyncio.wait([waiting, task], timeout=30, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if task.done() and not started.is_set():
                task.result()  # raises what stopped it before it started
        finally:
            del self.signals.created[run_id]

    async def resume(
        self, run_id: str, *, owner: str | None = None, drain: asyncio.Event | None = None
    ) -> Any:
        """Resume a claimed run with the agent that started it (`Worker` calls this); once
        `drain` is set it stops after its current step."""
        return await self._agent_of(run_id).resume(run_id, owner=owner, drain=drain)

    def agent_of(self, run_id: str) -> tuple[str, Agent | Flow] | None:
        """The name and agent that drive run `run_id` here, or None."""
        name = run_id.partition(".")[0]
        if name in self.agents:
            return name, self.agents[name]
        if len(self.agents) == 1:
            return next(iter(self.agents.items()))
        return None

    def _agent_of(self, run_id: str) -> Agent | Flow:
        name = run_id.partition(".")[0]
        agent = self.agents.get(name)
        if agent is None and len(self.agents) == 1:
            agent = next(iter(self.agents.values()))
        if agent is None:
            raise RunNotResumable(f"run {run_id}: no agent named {name!r} is served here")
        return agent

    async def serve(self, stop: asyncio.Event, *, grace_s: float = 10.0) -> None:
        """Resume ready runs until `stop`; then let the runs started here reach their next
        stop (interrupted after `grace_s`: such a run stays where it was saved, for any
        process to resume)."""
        await self.worker.serve(stop)
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)


def _wired(agent: Agent | Flow, store: Store, signals: Signals) -> Agent | Flow:
    from loopstate.machines.agent import Agent

    hooks = [h for h in (agent.options.hooks, signals) if h is not None]
    if isinstance(agent, Agent) and isinstance(signals, StreamingSignals):
        return agent.clone(store=store, hooks=hooks, model=with_fallback(agent.model), retry=None)
    return agent.clone(store=store, hooks=hooks)


def _now() -> float:
    import time

    return time.time()
