"""The agent loop: thinking → awaiting_approval → executing_tool → thinking, and its endings.

`done` is where a run rests once it has answered: a user message takes it back to `thinking`
(a conversation goes on, same run, same history, same audit trail). `failed` and `aborted`
are final.

The machine decides; the runner acts. It is pure and synchronous: guards read only the facts an
event carries, never the clock, the network or a store.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from statemachine import State, StateChart

from loopstate.machines.table import TransitionTable


class AgentLoop(StateChart[Any]):
    """One run of a tool-calling agent.

    - `replied` carries `calls` (tool calls in the turn) and `gated` (how many need a decision).
    - `tools_done` and `decided` carry `stop`: a stop reason, or None to go on.
    - `user_message` continues a run that answered (`done`) with the user's next message.
    - `model_error`: the model call failed in a way that may succeed later (a rate limit, an
      overloaded provider, a dropped connection), or once the set-up is fixed (an API key,
      the model's name). The run stops in `model_failed` (its status
      is `failed`) and `retry`, asked for by someone resuming it, calls the model again:
      nothing before the failed step runs again.
    - `over_budget`: the next model call or batch of tools would pass the run's `Budget`; it
      does not start, and the run rests in `budget_exceeded` (status `failed`) until
      `budget_raised` (a resume with a raised budget) goes back to the step it stopped
      before: `batch` says a batch of tools waits to run, `child` that the batch waits for a
      sub-agent's run that rested at the tree's budget (from `awaiting_approval` too).
    - `expired`: as `decided`, when a call's approval deadline passed and its `on_expiry`
      decided it (`@tool(decide_within=...)`, applied by the worker or `serve`).
    - `pause`: someone asked the run to stop at its next step boundary (`Agent.pause`); it
      rests in `paused` with nothing in flight until a resume sends `unpause` (`batch` and
      `child` as for `budget_raised`: a sub-agent's run paused by its own id rests its parent
      in `paused` too, from `awaiting_approval` as well, its call waiting for that run).
    """

    # Strict: an event the current state does not accept raises, and an error in a guard
    # propagates to the runner (which ends the run in `failed`) instead of becoming an event.
    allow_event_without_transition = False
    catch_errors_as_events = False

    machine_version = 1

    idle = State(initial=True)
    thinking = State()
    awaiting_approval = State()
    executing_tool = State()
    model_failed = State()
    budget_exceeded = State()
    paused = State()
    done = State()  # rests: a user message continues the conversation
    failed = State(final=True)
    aborted = State(final=True)

    start = idle.to(thinking)
    replied = (
        thinking.to(done, cond="is_answer")
        | thinking.to(awaiting_approval, cond="has_gated_calls")
        | thinking.to(executing_tool)
    )
    decided = awaiting_approval.to(executing_tool)
    expired = awaiting_approval.to(executing_tool)  # timed: a call's deadline decided it
    tools_done = executing_tool.to(done, cond="stop_requested") | executing_tool.to(thinking)
    user_message = done.to(thinking)
    # After a crash, calls that were running when the process died may be put to a person again.
    reapprove = executing_tool.to(awaiting_approval)
    model_error = thinking.to(model_failed)
    retry = model_failed.to(thinking)
    pause = (
        thinking.to(paused)
        | executing_tool.to(paused)
        | awaiting_approval.to(paused)  # a sub-agent's run was paused
    )
    unpause = (
        paused.to(executing_tool, cond="has_batch")
        | paused.to(awaiting_approval, cond="waits_on_child")
        | paused.to(thinking)
    )
    over_budget = (
        thinking.to(budget_exceeded)
        | executing_tool.to(budget_exceeded)
        | awaiting_approval.to(budget_exceeded)  # a sub-agent's run rests at the budget
    )
    budget_raised = (
        budget_exceeded.to(executing_tool, cond="has_batch")
        | budget_exceeded.to(awaiting_approval, cond="waits_on_child")
        | budget_exceeded.to(thinking)
    )
    abort = (
        idle.to(aborted)
        | thinking.to(aborted)
        | awaiting_approval.to(aborted)
        | executing_tool.to(aborted)
        | model_failed.to(aborted)
        | budget_exceeded.to(aborted)
        | paused.to(aborted)
    )
    fail = (
        idle.to(failed)
        | thinking.to(failed)
        | awaiting_approval.to(failed)
        | executing_tool.to(failed)
        | model_failed.to(failed)
        | budget_exceeded.to(failed)
        | paused.to(failed)
    )

    def is_answer(self, calls: int) -> bool:
        return calls == 0

    def has_gated_calls(self, gated: int) -> bool:
        return gated > 0

    def has_batch(self, batch: bool) -> bool:
        return batch

    def waits_on_child(self, child: bool = False) -> bool:
        return child

    def stop_requested(self, stop: str | None = None) -> bool:
        return stop is not None


LOOP_FINAL = frozenset({AgentLoop.done.id, *(s.id for s in AgentLoop.final_states)})
"""Where a drive of the agent loop stops for good or until the user speaks: done (a resting
state that `user_message` continues), failed, aborted (final)."""
LOOP_STOPPED = LOOP_FINAL | {AgentLoop.model_failed.id, AgentLoop.budget_exceeded.id}
"""Where a drive of the agent loop stops until someone acts: `LOOP_FINAL`, `model_failed`
(which `retry` leaves) and `budget_exceeded` (which `budget_raised` leaves)."""


class AgentEvents(Protocol):
    """The events a driver sends to an `AgentLoop`, typed so mypy checks every send."""

    @property
    def current_state_value(self) -> Any: ...
    def start(self) -> Any: ...
    def replied(self, *, calls: int, gated: int) -> Any: ...
    def decided(self) -> Any: ...
    def expired(self) -> Any: ...
    def user_message(self) -> Any: ...
    def tools_done(self, *, stop: str | None) -> Any: ...
    def reapprove(self) -> Any: ...
    def model_error(self) -> Any: ...
    def retry(self) -> Any: ...
    def pause(self) -> Any: ...
    def unpause(self, *, batch: bool, child: bool = False) -> Any: ...
    def over_budget(self) -> Any: ...
    def budget_raised(self, *, batch: bool, child: bool = False) -> Any: ...
    def abort(self) -> Any: ...
    def fail(self) -> Any: ...


LOOP_TABLE = TransitionTable(AgentLoop)
"""`AgentLoop` read into a transition table: what the driver steps (see `TransitionTable`)."""


def agent_loop(state: str) -> AgentEvents:
    """An `AgentLoop` positioned at `state`: its transition table, which decides as the
    python-statemachine instance does, without its per-event engine or a machine object per
    run (an event costs a lookup and its guards)."""
    return cast(AgentEvents, LOOP_TABLE.at(state))
