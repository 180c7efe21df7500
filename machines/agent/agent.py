"""`Agent`: the agent loop machine, its steps and its ports, behind `run`, `resume`, `abort`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from loopstate.engine.approval import ApprovalRequest, Approver, Decision, SyncApprover
from loopstate.engine.budget import Budget
from loopstate.engine.clock import Clock, IdSource, random_ids, system_clock
from loopstate.engine.compat import OnChange
from loopstate.engine.core import RunCore
from loopstate.engine.deadlines import Expiry, check_expiry, seconds
from loopstate.engine.definition import Definition
from loopstate.engine.errors import DefinitionError
from loopstate.engine.executor import DenialFormatter
from loopstate.engine.hooks import Hooks
from loopstate.engine.messages import Message
from loopstate.engine.migration import Migration
from loopstate.engine.model import Model, ToolChoice
from loopstate.engine.models.retry import RetryingModel, RetryPolicy
from loopstate.engine.operations import abort_run, forget_decision
from loopstate.engine.options import RunOptions, StopCondition
from loopstate.engine.pause import pause_run
from loopstate.engine.pinning import Judgement
from loopstate.engine.protocol import Given, RunProtocol, opening_state
from loopstate.engine.result import RunResult
from loopstate.engine.rule import Rule
from loopstate.engine.run_stream import RunStream
from loopstate.engine.state import ParentLink, RunState
from loopstate.engine.store import DEFAULT_LEASE_S, Store
from loopstate.engine.sync import blocking, refuse_in_loop
from loopstate.engine.tool import Tool, Toolset
from loopstate.engine.tree import UsageReport, delegated, pending_tree, run_tree, usage_report
from loopstate.machines.agent import forking
from loopstate.machines.agent.conversation import turn_start
from loopstate.machines.agent.delegation import agent_tool
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.agent.pinned import AgentPins
from loopstate.machines.agent.resuming import AgentKind, opening_messages
from loopstate.machines.agent.steps import HistoryView, LoopConfig
from loopstate.machines.agent.toolsets import open_toolsets
from loopstate.tools.registry import ToolRegistry


class Agent:
    """A tool-calling agent whose loop is the `AgentLoop` machine.

    `model` is a litellm model name (e.g. `"openai/gpt-4o-mini"`) or a model object such as
    `LiteLLMModel(...)` or `ScriptedModel([...])`. Runs are kept in `store`: by default a
    `SQLiteStore` at `.loopstate/runs.db` of the project (see `SQLiteStore`; pass `MemoryStore()`
    for runs that need not outlive the process). Without an `approver` (or when it leaves a
    call undecided), a run that reaches a gated call suspends: `run()` returns with
    `status == "awaiting_approval"` and `resume()` continues it, in any process that uses
    the same store. `retry` retries a model call that failed in a way that may pass (a rate
    limit, an overloaded provider, a dropped connection), honouring the provider's
    `retry-after`; a run whose model call still fails stops in `model_failed` (status
    `failed`), and `resume()` calls the model again from that step. A run that answered
    goes on with `resume(run_id, message=...)`; `view` is what the model is shown of the
    history (e.g. `TokenBudget(100_000)`; default: all). `budget` limits each run (tokens,
    cost, tool calls, model calls, seconds: see `Budget`), over the run and its sub-agents'
    runs; a run that would pass it rests in `budget_exceeded` until `resume(budget=...)`.
    `rules` gate and forbid calls whatever their tools declare: a `Rule(decision="ask")`
    makes the calls it matches wait for a decision, a `Rule(forbid=True)` denies them and
    no approval, from any door, can let one run (kept with each run; see `Rule`).
    `decide_within` and `on_expiry` are the default approval deadline of its gated calls
    (a tool's own `@tool(decide_within=...)` wins).

    Each run is pinned to what it was started with (its `Definition`: machine, tools and
    their schemas, gates and descriptions, instructions, model, `version`): a resume under a
    changed agent goes on if the changes are compatible and `on_change` allows them ("allow"
    or "refuse", for all kinds or by kind: e.g. `{"model": "refuse"}`; other instructions
    refuse by default), is migrated by the first of `migrations` declared for the run's
    definition, or raises `IncompatibleRun` listing each difference (nothing changed).
    """

    def __init__(
        self,
        model: str | Model,
        tools: Iterable[Tool | Toolset] = (),
        *,
        instructions: str | None = None,
        approver: Approver | SyncApprover | None = None,
        auto_approve: bool = False,
        denial_message: DenialFormatter | None = None,
        max_steps: int = 25,
        stop_when: Sequence[StopCondition] = (),
        tool_choice: ToolChoice = "auto",
        view: HistoryView | None = None,
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
        decide_within: timedelta | float | None = None,
        on_expiry: Expiry | None = None,
        version: str | None = None,
        on_change: OnChange | Mapping[str, OnChange] | None = None,
        migrations: Sequence[Migration] = (),
    ) -> None:
        if max_steps < 1:
            raise DefinitionError("max_steps must be at least 1")
        check_expiry("Agent", seconds(decide_within), on_expiry)
        self._options: dict[str, Any] = {
            k: v for k, v in locals().items() if k not in ("self", "__class__")
        }
        self.model = as_model(model, retry)
        given = tuple(tools)
        self._toolsets = tuple(t for t in given if isinstance(t, Toolset))
        self._listed = not self._toolsets
        self.tools = ToolRegistry(t for t in given if not isinstance(t, Toolset))
        self._options["tools"] = given
        self.instructions = instructions
        self.stop_when = tuple(stop_when)
        self.options = RunOptions.of(self._options)
        self.store: Store = self.options.store
        self.clock = clock
        self.ids = ids
        self._loop = LoopConfig(
            model=self.model,
            options=self.options,
            tools={t.name: t for t in self.tools},
            max_steps=max_steps,
            stop_when=tuple(stop_when),
            tool_choice=tool_choice,
            view=view,
            deps=deps,
        )
        self._pins = AgentPins.of(instructions, version, on_change, migrations)
        kind = AgentKind(instructions, self._turn, self._toolsets_open, self._pins)
        self._protocol = RunProtocol(self.options, kind)

    def clone(self, **changes: Any) -> Agent:
        """A new agent with the same configuration but for `changes` (any `__init__`
        argument): e.g. `agent.clone(store=SQLiteStore(path))` or `agent.clone(model=replay)`."""
        unknown = set(changes) - set(self._options)
        if unknown:
            raise DefinitionError(f"Agent has no options {sorted(unknown)}")
        options = {**self._options, **changes}
        return Agent(options.pop("model"), options.pop("tools"), **options)

    async def run(
        self,
        prompt: str | Sequence[Message],
        *,
        run_id: str | None = None,
        tenant: str | None = None,
    ) -> RunResult:
        """Start a run and drive it until it ends or suspends. `tenant`: the team the run
        belongs to (kept in its `metadata`; the HTTP service shows it to that team only)."""
        return await self._run(prompt, run_id, None, tenant=tenant)

    def as_tool(self, *, name: str, description: str, direct_return: bool = False) -> Tool:
        """The agent as a tool another agent can call: each call is a child run of this agent
        in the parent's store (its own id, tools, audit trail and diagram), given the task the
        parent's model wrote. Its gated calls go to the parent run's approver (its own
        `approver` is not used, and it auto-approves only if the parent does); a tool the
        parent gates stays gated in the child, and the parent's `rules` hold in it with its
        own (the stricter wins: no approval runs a call either forbids). If a call is left
        undecided the child and the parent suspend together: the parent's `pending` lists the
        child's calls, and a decision for one given to the parent (`resume`, `loopstate
        approve`) is routed to it.
        The child's answer is the call's result; with `direct_return=True` it ends the
        parent run as its output, with no further model call. A child that fails or is
        aborted is a failed call. See `usage` for usage rolled up over the tree."""
        return agent_tool(self, name=name, description=description, direct_return=direct_return)

    async def start_child(self, prompt: str, *, run_id: str, parent: ParentLink) -> RunResult:
        """Start the child run `run_id` of a parent (see `as_tool`; flows' phases use it)."""
        return await self._run(prompt, run_id, None, parent)

    async def resume_child(self, run_id: str, *, budget: Budget | None = None) -> RunResult:
        """Continue the child run `run_id` for its parent (see `as_tool`): only its parent's
        run resumes a sub-agent's run, so that its gates and approver are the parent's;
        `budget`: the parent's raised budget, for a child resting in `budget_exceeded`."""
        return await self._resume(run_id, Given(actor="parent", as_child=True, budget=budget))

    async def pending(self, run_id: str) -> list[ApprovalRequest]:
        """What waits for a decision in the stored run `run_id` and every run it delegated to
        (each request names its `run_id`)."""
        return await pending_tree(self.store, run_id)

    async def usage(self, run_id: str) -> UsageReport:
        """The stored run's usage: its own, the total with its sub-agents' runs, and per agent."""
        return usage_report(await run_tree(self.store, run_id))

    def stream(
        self, prompt: str | Sequence[Message], *, run_id: str | None = None
    ) -> RunStream[RunResult]:
        """`run`, streamed: `async for event in agent.stream(prompt)` yields the run's events
        with the model's text and tool-call deltas among them; `.result` is the `RunResult`
        once the iteration ends. Model calls stream when the model can (`StreamingModel`)."""
        return RunStream(lambda feed: self._run(prompt, run_id, feed))

    def stream_resume(
        self,
        run_id: str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        message: str | None = None,
        actor: str = "resume",
    ) -> RunStream[RunResult]:
        """`resume`, streamed (decisions, a message, or both), as `stream` is `run`."""
        given = Given(decisions=decisions, message=message, actor=actor)
        return RunStream(lambda feed: self._resume(run_id, given, feed=feed))

    async def _run(
        self,
        prompt: str | Sequence[Message],
        run_id: str | None,
        feed: Hooks | None,
        parent: ParentLink | None = None,
        *,
        tenant: str | None = None,
    ) -> RunResult:
        state = opening_state(
            run_id=run_id or self.ids(),
            machine="agent",
            machine_version=AgentLoop.machine_version,
            messages=opening_messages(self.instructions, prompt),
            now=self.clock(),
            parent=parent,
            tenant=tenant,
        )
        return await self._result(
            await self._protocol.start(state, model=self.model.name, feed=feed)
        )

    def _toolsets_open(self) -> AbstractAsyncContextManager[None]:
        """The toolsets' sessions for one run; their tools listed into this agent's once."""
        return open_toolsets(self._toolsets, None if self._listed else self._add_listed)

    def _add_listed(self, listed: Sequence[Tool]) -> None:
        self.tools = ToolRegistry([*self.tools, *listed])
        self._loop = replace(self._loop, tools={t.name: t for t in self.tools})
        self._listed = True

    def run_sync(self, prompt: str | Sequence[Message], *, run_id: str | None = None) -> RunResult:
        """`run` for code that is not async. Inside a running event loop (a notebook, an
        async function) it raises `RuntimeError`: `await agent.run(...)` there instead.
        Interrupted (Ctrl-C, SIGTERM), the run stays where it was saved: one line says how to
        resume it, and `RunInterrupted` (a `SystemExit`, so no traceback) is raised."""
        refuse_in_loop("agent.run(...)")
        run_id = run_id or self.ids()
        coroutine = self.run(prompt, run_id=run_id)
        return blocking(coroutine, instead="agent.run(...)", run_id=run_id)

    def resume_sync(
        self,
        run_id: str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        actor: str = "resume",
    ) -> RunResult:
        """`resume` for code that is not async (same rules as `run_sync`)."""
        coroutine = self.resume(run_id, decisions, actor=actor)
        return blocking(coroutine, instead="agent.resume(...)", run_id=run_id)

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        message: str | None = None,
        results: Mapping[str, Any] | None = None,
        actor: str = "resume",
        owner: str | None = None,
        drain: asyncio.Event | None = None,
        budget: Budget | None = None,
    ) -> RunResult:
        """Continue a suspended or interrupted run exactly where it stopped, or a run that
        answered with the user's next `message` (a conversation: same run id, the history
        and the audit trail go on).

        `decisions` (by call id) are applied all or none: an unknown call, a decision for
        other arguments (`digest`) or a second decision for a call raises `DecisionError`
        and leaves the run unchanged. Decisions recorded in the store (e.g. by the CLI) are
        applied first. A `message` may accompany decisions: it joins the history after the
        batch's results. Raises `RunBusy` if another process is driving the run. `owner` is
        the lease owner to resume under (a worker that claimed the run passes its own). Once
        `drain` is set the run stops after its current step, still `running` (a worker that
        is shutting down sets it). A run stopped in `model_failed` calls the model again.
        `results` (by call id) are the values of external tools' calls (`Result`). `budget`
        raises the run's limits (those it names); a run resting in `budget_exceeded` goes on
        once they let its next step start (`RunNotResumable` naming the limit otherwise)."""
        given = Given.of(decisions, results, message, actor, budget)
        return await self._resume(run_id, given, owner=owner, drain=drain)

    async def _resume(
        self,
        run_id: str,
        given: Given,
        owner: str | None = None,
        feed: Hooks | None = None,
        drain: asyncio.Event | None = None,
    ) -> RunResult:
        core = await self._protocol.resume(run_id, given, owner=owner, feed=feed, drain=drain)
        return await self._result(core)

    fork = forking.fork

    @property
    def definition(self) -> Definition:
        """What this agent's runs are pinned to (`fingerprint`: what `Migration(from_=)`
        names); an agent with toolsets lists their tools when it first drives a run."""
        return self._pins.pin(self._loop.tools, self.model.name).definition

    async def check_run(self, run_id: str) -> Judgement:
        """Whether the stored run `run_id` would resume under this agent: compatible, migrates
        (by which migration) or incompatible (why), as `resume` would judge it; nothing is
        changed (`loopstate runs check` asks this of every run that is not final)."""
        return await self._protocol.verdict(run_id)

    async def abort(self, run_id: str, reason: str, *, actor: str = "user") -> RunResult:
        """End a suspended (or interrupted) run in `aborted`: no further model call or tool."""
        return await abort_run(self.store, run_id, reason, actor=actor, clock=self.clock)

    async def pause(self, run_id: str, *, actor: str = "user") -> bool:
        """Ask the run, driven by any process, to stop at its next step boundary: it rests in
        `paused` (nothing in flight, lease released) until `resume`. True if it was running;
        False if not (a run waiting for a decision stays as it is)."""
        return await pause_run(self.store, run_id, actor=actor, clock=self.clock)

    async def forget(
        self,
        run_id: str,
        tool: str | None = None,
        *,
        rule: str | None = None,
        actor: str = "user",
        reason: str = "",
    ) -> RunState:
        """Revoke the run's remembered decision for `tool`, or its remembered rule named
        `rule`: the calls it covered wait again. The revocation is kept with it (who, when)."""
        return await forget_decision(
            self.store, run_id, tool, rule=rule, actor=actor, reason=reason, clock=self.clock
        )

    async def _result(self, core: RunCore) -> RunResult:
        """What `run`/`resume` return; a run that waits for a sub-agent lists the calls its
        tree waits for."""
        result = RunResult.of(core.state, tuple(core.events))
        state = core.state
        if state.status == "awaiting_approval" and any(map(delegated, state.batch)):
            pending = await pending_tree(self.store, core.state.run_id)
            result = result.model_copy(update={"pending": tuple(pending)})
        return result

    def _turn(self, state: RunState) -> LoopConfig:
        """The loop's configuration for the run's current turn: its step budget counts from
        the turn's first model call."""
        return replace(self._loop, max_steps=turn_start(state) + self._loop.max_steps)


def as_model(model: str | Model, retry: RetryPolicy | None = None) -> Model:
    """A model object for a litellm model name (a `Model` as is), retrying by `retry`."""
    if isinstance(model, str):
        from loopstate.engine.models.litellm import LiteLLMModel

        model = LiteLLMModel(model)
    if not isinstance(model, Model):
        raise DefinitionError(f"{model!r} is not a model name or a Model")
    return model if retry is None else RetryingModel(model, retry)
