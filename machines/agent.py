"""`Agent`: the agent loop machine, its runner and its ports, behind `run` and `resume`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from loopstate.engine.approval import Approver, Decision
from loopstate.engine.clock import Clock, IdSource, random_ids, system_clock
from loopstate.engine.errors import DefinitionError, RunNotResumable
from loopstate.engine.hooks import HookChain, Hooks
from loopstate.engine.messages import Message, SystemMessage, UserMessage
from loopstate.engine.model import Model, ToolChoice
from loopstate.engine.result import RunResult
from loopstate.engine.runner import FINAL, AgentMachine, RunConfig, Runner, StopCondition
from loopstate.engine.sqlite_store import SQLiteStore
from loopstate.engine.state import RunState
from loopstate.engine.store import DEFAULT_LEASE_S, Store, lease_owner
from loopstate.engine.tool import Tool
from loopstate.machines.agent_loop import AgentLoop
from loopstate.tools.registry import ToolRegistry


def _machine(state: str) -> AgentMachine:
    machine: AgentMachine = AgentLoop(start_value=state)
    return machine


class Agent:
    """A tool-calling agent whose loop is the `AgentLoop` machine.

    `model` is a litellm model name (e.g. `"openai/gpt-4o-mini"`) or a model object such as
    `LiteLLMModel(...)` or `ScriptedModel([...])`. Runs are kept in `store`: by default a
    `SQLiteStore` at `.loopstate/runs.db` under the working directory (pass `MemoryStore()`
    for runs that need not outlive the process). Without an `approver` (or when it leaves a
    call undecided), a run that reaches a gated call suspends: `run()` returns with
    `status == "awaiting_approval"` and `resume()` continues it, in any process that uses
    the same store.
    """

    def __init__(
        self,
        model: str | Model,
        tools: Iterable[Tool] = (),
        *,
        instructions: str | None = None,
        approver: Approver | None = None,
        auto_approve: bool = False,
        max_steps: int = 25,
        stop_when: Sequence[StopCondition] = (),
        tool_choice: ToolChoice = "auto",
        hooks: Hooks | Sequence[Hooks] | None = None,
        store: Store | None = None,
        workspace: str | Path | None = None,
        deps: Any = None,
        ask_again_after_crash: bool = False,
        clock: Clock = system_clock,
        ids: IdSource = random_ids,
        lease_s: float = DEFAULT_LEASE_S,
        log: Any = None,
    ) -> None:
        if max_steps < 1:
            raise DefinitionError("max_steps must be at least 1")
        self._options: dict[str, Any] = {
            k: v for k, v in locals().items() if k not in ("self", "__class__")
        }
        self.model = _model(model)
        self.tools = ToolRegistry(tools)
        self._options["tools"] = tuple(self.tools)
        self.instructions = instructions
        self.store: Store = store if store is not None else SQLiteStore()
        self.ids = ids
        self.clock = clock
        self._config = RunConfig(
            model=self.model,
            machine=_machine,
            store=self.store,
            tools={t.name: t for t in self.tools},
            approver=approver,
            auto_approve=auto_approve,
            max_steps=max_steps,
            stop_when=tuple(stop_when),
            tool_choice=tool_choice,
            hooks=_hooks(hooks),
            clock=clock,
            workspace=Path(workspace) if workspace is not None else None,
            deps=deps,
            ask_again_after_crash=ask_again_after_crash,
            lease_s=lease_s,
            log=log,
        )

    def clone(self, **changes: Any) -> Agent:
        """A new agent with the same configuration but for `changes` (any `__init__`
        argument): e.g. `agent.clone(store=SQLiteStore(path))` or `agent.clone(model=replay)`."""
        unknown = set(changes) - set(self._options)
        if unknown:
            raise DefinitionError(f"Agent has no options {sorted(unknown)}")
        options = {**self._options, **changes}
        return Agent(options.pop("model"), options.pop("tools"), **options)

    def _runner_config(self, owner: str | None = None) -> RunConfig:
        return RunConfig(**{**vars(self._config), "owner": owner or lease_owner()})

    async def run(self, prompt: str | Sequence[Message], *, run_id: str | None = None) -> RunResult:
        """Start a run and drive it until it ends or suspends."""
        config = self._runner_config()
        now = self.clock()
        state = RunState(
            run_id=run_id or self.ids(),
            machine="agent",
            machine_version=AgentLoop.machine_version,
            messages=self._opening(prompt),
            created_at=now,
            updated_at=now,
        )
        await self.store.create(state, owner=config.owner, now=now, ttl=config.lease_s)
        runner = Runner(config, state)
        await runner.announce()
        return await runner.drive()

    def run_sync(self, prompt: str | Sequence[Message], *, run_id: str | None = None) -> RunResult:
        """`run` for code that is not async (not from inside a running event loop)."""
        return asyncio.run(self.run(prompt, run_id=run_id))

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        actor: str = "resume",
        owner: str | None = None,
    ) -> RunResult:
        """Continue a suspended or interrupted run exactly where it stopped.

        `decisions` (by call id) are applied all or none: an unknown call, a decision for
        other arguments (`digest`) or a second decision for a call raises `DecisionError`
        and leaves the run unchanged. Decisions recorded in the store (e.g. by the CLI) are
        applied first. Raises `RunBusy` if another process is driving the run. `owner`: the
        lease owner to resume under (a worker's, which claimed the run); else a new one."""
        config = self._runner_config(owner)
        state = await self.store.acquire(
            run_id, owner=config.owner, now=self.clock(), ttl=config.lease_s
        )
        try:
            runner = Runner(config, state)
            if state.state in FINAL:
                raise RunNotResumable(f"run {run_id} has ended ({state.state}); nothing to resume")
            if decisions and state.state != "awaiting_approval":
                raise RunNotResumable(
                    f"run {run_id} is {state.state}, not awaiting approval: decisions cannot apply"
                )
            recovered = runner.recover()
            await _apply_inbox(runner)
            if decisions:
                await runner.apply_decisions(decisions, actor=actor)
        except BaseException:
            await self.store.release(run_id, owner=config.owner)
            raise
        await runner.announce(resumed=recovered)
        return await runner.drive()

    async def abort(self, run_id: str, reason: str, *, actor: str = "user") -> RunResult:
        """End a suspended (or interrupted) run in `aborted`: no further model call or tool."""
        from loopstate.machines.runs import abort_run

        return await abort_run(self.store, run_id, reason, actor=actor, clock=self.clock)

    def _opening(self, prompt: str | Sequence[Message]) -> tuple[Message, ...]:
        system: tuple[Message, ...] = (
            (SystemMessage(content=self.instructions),) if self.instructions else ()
        )
        if isinstance(prompt, str):
            return (*system, UserMessage(content=prompt))
        return (*system, *prompt)


async def _apply_inbox(runner: Runner) -> None:
    """Apply decisions recorded while the run was suspended, each with its own actor."""
    inbox = runner.state.inbox
    if not inbox:
        return
    runner.state = runner.state.model_copy(update={"inbox": ()})
    for queued in inbox:
        if runner.state.state in FINAL:
            break
        await runner.apply_decisions({queued.call_id: queued.decision}, actor=queued.actor)


def _model(model: str | Model) -> Model:
    if isinstance(model, str):
        from loopstate.engine.litellm_model import LiteLLMModel

        litellm_model: Model = LiteLLMModel(model)
        return litellm_model
    if not isinstance(model, Model):
        raise DefinitionError(f"{model!r} is not a model name or a Model")
    return model


def _hooks(hooks: Hooks | Sequence[Hooks] | None) -> HookChain | None:
    if hooks is None:
        return None
    chain = HookChain([hooks] if isinstance(hooks, Hooks) else list(hooks))
    return chain if chain.hooks else None
