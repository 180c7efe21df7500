"""Lifecycle hooks: typed observers with optional async methods, composable and mergeable.

What a hook may do: observe everything; replace a tool's result text (`after_tool`: truncate,
redact, annotate); keep metadata with the run (`run_metadata`: e.g. a trace context, so that
a resume in another process continues the same trace). What it may not do: decide
an approval, skip a call, or change arguments — hooks receive frozen data, and only the
approval path can decide. A hook that raises fails the run (errors are never swallowed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.events import Event
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.state import CallRecord, RunState, Transition
from loopstate.engine.streaming import TextDelta, ToolCallDelta


class Hooks:
    """Override any subset of these methods. Every method is optional and async."""

    async def on_run_start(self, run: RunState) -> None:
        """A run starts or resumes."""

    async def on_run_end(self, run: RunState) -> None:
        """A run finishes, suspends, or stops on an error."""

    async def run_metadata(self, run: RunState) -> Mapping[str, Any] | None:
        """Asked right after `on_run_start`: entries to keep in the run's `metadata` (saved
        with it, seen by `on_run_start` of any later resume, in any process). Use a key of
        your own; None (or entries already there) changes nothing."""
        return None

    async def before_model(self, request: ModelRequest) -> None:
        """Before each model call."""

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> None:
        """After each model call."""

    async def before_tool(self, call: CallRecord) -> None:
        """Before a tool runs (its intent is already persisted)."""

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        """After a tool ran. Return a replacement for the result text, or None to keep it."""
        return None

    async def on_approval_requested(self, requests: Sequence[ApprovalRequest]) -> None:
        """Gated calls of one step are about to wait for a decision."""

    async def on_approval_decided(self, call: CallRecord) -> None:
        """A decision was applied to a call."""

    async def on_transition(self, transition: Transition) -> None:
        """The machine moved."""

    async def on_event(self, event: Event) -> None:
        """Every event, including those above, as typed data."""

    async def on_text_delta(self, delta: TextDelta) -> None:
        """A piece of the model's text as it streams. Defining this (or `on_tool_call_delta`)
        makes the run's model calls stream, when the model can; deltas are never stored."""

    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None:
        """A piece of a tool call as it streams (its arguments arrive in fragments)."""


_METHODS = tuple(
    name for name in vars(Hooks) if name.startswith(("on_", "before_", "after_", "run_"))
)


def _overrides(hooks: Hooks, name: str) -> bool:
    return getattr(type(hooks), name) is not getattr(Hooks, name)


class HookChain(Hooks):
    """Several hooks as one: each method calls the hooks that override it, in order.

    `after_tool` is a pipeline: each hook sees the result the previous one returned.
    """

    def __init__(self, hooks: Sequence[Hooks]) -> None:
        flat: list[Hooks] = []
        for h in hooks:
            flat.extend(h.hooks if isinstance(h, HookChain) else [h])
        self.hooks: tuple[Hooks, ...] = tuple(flat)
        self._by_method: dict[str, tuple[Hooks, ...]] = {
            name: tuple(h for h in flat if _overrides(h, name)) for name in _METHODS
        }
        self.streams = bool(
            self._by_method["on_text_delta"] or self._by_method["on_tool_call_delta"]
        )
        """Whether any hook listens to deltas (otherwise model calls do not stream)."""

    async def _each(self, name: str, *args: Any) -> None:
        for h in self._by_method[name]:
            await getattr(h, name)(*args)

    async def on_run_start(self, run: RunState) -> None:
        await self._each("on_run_start", run)

    async def on_run_end(self, run: RunState) -> None:
        await self._each("on_run_end", run)

    async def run_metadata(self, run: RunState) -> Mapping[str, Any] | None:
        kept: dict[str, Any] = {}
        for h in self._by_method["run_metadata"]:
            kept.update(await h.run_metadata(run) or {})
        return kept or None

    async def before_model(self, request: ModelRequest) -> None:
        await self._each("before_model", request)

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> None:
        await self._each("after_model", request, response)

    async def before_tool(self, call: CallRecord) -> None:
        await self._each("before_tool", call)

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        changed = False
        for h in self._by_method["after_tool"]:
            replacement = await h.after_tool(call, result)
            if replacement is not None:
                result, changed = replacement, True
        return result if changed else None

    async def on_approval_requested(self, requests: Sequence[ApprovalRequest]) -> None:
        await self._each("on_approval_requested", requests)

    async def on_approval_decided(self, call: CallRecord) -> None:
        await self._each("on_approval_decided", call)

    async def on_transition(self, transition: Transition) -> None:
        await self._each("on_transition", transition)

    async def on_event(self, event: Event) -> None:
        await self._each("on_event", event)

    async def on_text_delta(self, delta: TextDelta) -> None:
        for h in self._by_method["on_text_delta"]:
            await h.on_text_delta(delta)

    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None:
        for h in self._by_method["on_tool_call_delta"]:
            await h.on_tool_call_delta(delta)


async def announce_start(hooks: HookChain | None, run: RunState) -> RunState:
    """Tell `hooks` that `run` starts or resumes; returns the run with the metadata they keep
    with it (the caller's next save stores it)."""
    if hooks is None:
        return run
    await hooks.on_run_start(run)
    kept = await hooks.run_metadata(run)
    if not kept or all(run.metadata.get(k) == v for k, v in kept.items()):
        return run
    return run.evolve(metadata={**run.metadata, **kept})


def compose(*hooks: Hooks) -> HookChain:
    """One hook object that runs all of `hooks` in order."""
    return HookChain(hooks)


def merge(first: Hooks, second: Hooks) -> HookChain:
    """Two hook sets as one: `first`'s methods run before `second`'s."""
    return HookChain([first, second])


class ChildObserver(Hooks):
    """What a run's own hooks are told of the runs it starts (sub-agents, agent phases): each
    event (it carries the child's run id), the approvals asked and given there, and the
    model's deltas if the run's hooks stream. Never the hooks that can change a run (tool
    results, model calls): the child keeps its own tools' results, gates and recorder."""

    def __init__(self, parent: HookChain, run_id: str) -> None:
        self.parent = parent
        self.run_id = run_id

    async def on_event(self, event: Event) -> None:
        await self.parent.on_event(event)

    async def on_approval_requested(self, requests: Sequence[ApprovalRequest]) -> None:
        mine = [r if r.run_id else r.model_copy(update={"run_id": self.run_id}) for r in requests]
        await self.parent.on_approval_requested(mine)

    async def on_approval_decided(self, call: CallRecord) -> None:
        await self.parent.on_approval_decided(call)


class _StreamingChildObserver(ChildObserver):
    async def on_text_delta(self, delta: TextDelta) -> None:
        await self.parent.on_text_delta(delta)

    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None:
        await self.parent.on_tool_call_delta(delta)


def child_observer(hooks: HookChain | None, run_id: str) -> ChildObserver | None:
    """The observer of child run `run_id` for a run with `hooks`; None if nothing would hear.
    A recorder (which records each child in its own cassette, `for_child`) is left out."""
    if hooks is None:
        return None
    heard = HookChain([h for h in hooks.hooks if not hasattr(h, "for_child")])
    if not any(heard._by_method[m] for m in _OBSERVED):
        return None
    kind = _StreamingChildObserver if heard.streams else ChildObserver
    return kind(heard, run_id)


_OBSERVED = (
    "on_event", "on_approval_requested", "on_approval_decided", "on_text_delta",
    "on_tool_call_delta",
)  # fmt: skip
