"""Forks: a new run whose past is a stored run's up to one of its transitions, copied through
the store port — no model call and no tool call for that past.

The state at a transition is rebuilt from its `Mark` (see `engine/marks.py`): the messages and
transitions up to it (both only grow), the calls then known with their statuses then, usage and
steps. What the fork continues with is made safe by construction:

- a call that waited for a decision at the transition waits again (a decision the source made
  later is not the fork's), and a call that had not started runs only in the fork's future;
- a call that had started by the transition (its intent was written) is reported as the
  source reported it: its outcome and result, never run again;
- decisions queued on the source, its lease and its future stay with the source.

Runs saved before loopstate kept marks can be forked only at their last transition, whose
state is the run's stored state (anything else could not be rebuilt exactly).
"""

from __future__ import annotations

from collections.abc import Mapping

from loopstate.engine.clock import Clock
from loopstate.engine.errors import ForkRefused
from loopstate.engine.marks import ForkedFrom, Mark, mark_of
from loopstate.engine.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from loopstate.engine.sanitize import storable_text
from loopstate.engine.state import CallRecord, FlowPosition, RunState, Transition
from loopstate.engine.store import Store

_ENDINGS = ("failed", "aborted")
_TRACE_KEY = "trace_context"
"""Where `loopstate.telemetry` keeps a run's trace context in its metadata."""
_EDIT_NOTE = "[The reviewer edited the arguments;"
_STARTED = ("running", "succeeded", "failed", "interrupted")
_REPORTED = ("succeeded", "failed", "interrupted")


def state_at(source: RunState, seq: int) -> RunState:
    """The run `source` as it was when its transition `seq` was saved (same run id; the caller
    gives the fork its own). `ForkRefused` if there is no such transition, it ended the run,
    or it was recorded without a mark and is not the last."""
    transitions = source.transitions
    if not 1 <= seq <= len(transitions):
        span = f"1–{len(transitions)}" if transitions else "none"
        raise ForkRefused(f"run {source.run_id} has no transition {seq} (it has {span})")
    transition = transitions[seq - 1]
    if transition.target in _ENDINGS:
        raise ForkRefused(
            f"transition {seq} of run {source.run_id} ends it ({transition.target}); "
            "fork at an earlier transition"
        )
    mark = transition.mark
    if mark is None:
        if seq != len(transitions):
            raise ForkRefused(
                f"run {source.run_id} was recorded before loopstate kept fork points: it can "
                f"be forked only at its last transition ({len(transitions)})"
            )
        mark = mark_of(source)
    return _rebuild(source, transition, transitions[:seq], mark)


def _rebuild(
    source: RunState, transition: Transition, transitions: tuple[Transition, ...], mark: Mark
) -> RunState:
    messages = source.messages[: mark.messages]
    told = _results_told(source.messages[mark.messages :])
    known = source.calls[mark.batch_start : mark.calls]
    batch = tuple(_call_at(c, s, told) for c, s in zip(known, mark.statuses, strict=True))
    target = mark.state or transition.target
    done = target == "done"
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    return source.evolve(
        state=target,
        messages=messages,
        transitions=transitions,
        calls=(*source.calls[: mark.batch_start], *batch),
        batch_start=mark.batch_start,
        steps=mark.steps,
        usage=mark.usage,
        stop_reason=(transition.reason or "answer") if done else None,
        output=(last.content or "" if last is not None else "") if done else None,
        error=transition.reason if target == "model_failed" else None,
        failure=None,
        inbox=(),
        remembered=tuple(r for r in source.remembered if r.at <= transition.at),
        child_ready=False,
        queued_message=None,
        flow=None if mark.flow is None else FlowPosition.model_validate(mark.flow),
        updated_at=transition.at,
    )


def _results_told(later: tuple[Message, ...]) -> dict[str, str]:
    """What the model was told of each call in `later` messages, by call id."""
    return {m.tool_call_id: m.content for m in later if isinstance(m, ToolMessage)}


def _call_at(call: CallRecord, status: str, told: Mapping[str, str]) -> CallRecord:
    """One call of the batch at the transition, by its status then (see the module's rules)."""
    if status == "awaiting":
        return call.evolve(
            status="awaiting", decision=None, decided_by=None, decided_at=None, result=None,
            attempts=0, child_run_id=None,
        )  # fmt: skip
    if status == "approved":
        return call.evolve(status="approved", result=None, attempts=0, child_run_id=None)
    if status in _STARTED and call.status not in _REPORTED:
        # the source has not reported it: the fork's resume recovers it as the source would
        return call.evolve(status="running", result=None)
    result = call.result if call.result is not None else _strip_note(call, told.get(call.call_id))
    return call.evolve(result=result)


def _strip_note(call: CallRecord, text: str | None) -> str | None:
    """The tool's own result from what the model was told (an edit's note is derived again)."""
    decision = call.decision
    edited = decision is not None and decision.kind == "edit"
    if text is not None and edited and text.startswith(_EDIT_NOTE):
        return text.partition("\n")[2]
    return text


def check_forkable(state: RunState, seq: int) -> None:
    """`ForkRefused` for runs whose fork would share a child run with the source."""
    if state.parent is not None:
        raise ForkRefused(
            f"run {state.run_id} is sub-agent {state.parent.name!r} of run "
            f"{state.parent.run_id}: fork that run"
        )
    flow = state.flow
    waiting = [c.call_id for c in state.batch if c.child_run_id and c.status == "running"]
    if waiting or (flow is not None and (flow.child is not None or flow.children)):
        raise ForkRefused(
            f"run {state.run_id} at transition {seq} works through a sub-agent's run; "
            "forking delegated work is not supported: fork at a transition before it"
        )


def with_edits(
    state: RunState,
    *,
    results: Mapping[str, str],
    replaced: tuple[int, str] | None,
    message: str | None,
) -> RunState:
    """`state` with a call's result or a user message replaced, or a user message added;
    `ForkRefused` (nothing written) for an edit that does not fit."""
    for call_id, text in results.items():
        state = _replace_result(state, call_id, storable_text(text))
    if replaced is not None:
        state = _replace_message(state, *replaced)
    if message is not None:
        state = _add_message(state, storable_text(message))
    return state


def _replace_result(state: RunState, call_id: str, text: str) -> RunState:
    messages = state.messages
    index = next(
        (
            i
            for i, m in enumerate(messages)
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id
        ),
        None,
    )
    if index is not None:
        changed = messages[index].model_copy(update={"content": text})
        return state.evolve(messages=(*messages[:index], changed, *messages[index + 1 :]))
    record = next((c for c in state.batch if c.call_id == call_id), None)
    if record is None or record.result is None:
        known = sorted(
            {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
            | {c.call_id for c in state.batch if c.result is not None}
        )
        raise ForkRefused(
            f"no result of call {call_id!r} at the fork point to replace "
            f"(calls with results: {', '.join(known) or 'none'})"
        )
    return state.replace_call(record.evolve(result=text))


def _replace_message(state: RunState, index: int, text: str) -> RunState:
    messages = state.messages
    if not 0 <= index < len(messages) or not isinstance(messages[index], UserMessage):
        users = [str(i) for i, m in enumerate(messages) if isinstance(m, UserMessage)]
        raise ForkRefused(
            f"message {index} at the fork point is not a user message "
            f"(user messages: {', '.join(users) or 'none'})"
        )
    if not text.strip():
        raise ForkRefused(f"the new text of message {index} is empty; say something")
    changed = UserMessage(content=storable_text(text))
    return state.evolve(messages=(*messages[:index], changed, *messages[index + 1 :]))


def _add_message(state: RunState, text: str) -> RunState:
    if not text.strip():
        raise ForkRefused("the message is empty; say something")
    if state.state in ("idle", "thinking", "model_failed"):
        return state.evolve(messages=(*state.messages, UserMessage(content=text)))
    # waiting or resting: it joins after the batch's results, or starts the next turn
    return state.evolve(queued_message=text)


def _with_instructions(state: RunState, text: str | None) -> tuple[RunState, str | None]:
    """`state` opened by the system message `text` (None, or the same: unchanged)."""
    messages = state.messages
    first = messages[0] if messages else None
    stored = first.content if isinstance(first, SystemMessage) else None
    if text is None or stored == text:
        return state, None
    rest = messages[1:] if stored is not None else messages
    return state.evolve(messages=(SystemMessage(content=text), *rest)), text


async def fork_run(
    store: Store,
    run_id: str,
    *,
    at: int,
    new_id: str,
    by: str,
    clock: Clock,
    owner: str,
    lease_s: float,
    message: str | None = None,
    replace_result: Mapping[str, str] | None = None,
    replace_message: tuple[int, str] | None = None,
    instructions: str | None = None,
) -> RunState:
    """Store the fork of run `run_id` at transition `at` as run `new_id` and return it. The
    source's lease is held while it is read (`RunBusy` if another process drives it), so
    what is copied is one committed state; the source itself is not written. `instructions`
    (the forking agent's) replace the source's system message when they differ."""
    now = clock()
    source = await store.acquire(run_id, owner=owner, now=now, ttl=lease_s)
    try:
        state = state_at(source, at)
        check_forkable(state, at)
        results = dict(replace_result or {})
        state = with_edits(state, results=results, replaced=replace_message, message=message)
        state, instructions = _with_instructions(state, instructions)
        fork = state.evolve(
            run_id=new_id,
            # a run's trace (OTelHooks keeps it here) is its own: the fork starts its own
            metadata={k: v for k, v in state.metadata.items() if k != _TRACE_KEY},
            created_at=now,
            updated_at=now,
            forked_from=ForkedFrom(
                run_id=run_id, seq=at, by=by, at=now, message=message, results=results,
                replaced_message=replace_message, instructions=instructions,
            ),
        )  # fmt: skip
        await store.create(fork, owner=owner, now=now, ttl=lease_s)
        await store.release(new_id, owner=owner)
        return fork
    finally:
        await store.release(run_id, owner=owner)
