"""Replay from step N with another model: the recording's first N model turns and their tool
results are served (no request, no side effect), then the given agent goes on live with its
own model, tools and approver; `Departure` reports where the new run leaves the recording.

    report = await replay(cassette, agent, from_step=2)
    report.first_divergent_step      # 3: the first step whose answer differs (None: none)
    print("\\n".join(report.lines()))  # recorded vs new, side by side
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from loopstate.engine.approval import ApprovalRequest, Decision
from loopstate.engine.data import Frozen
from loopstate.engine.errors import DefinitionError
from loopstate.engine.messages import Message
from loopstate.engine.model import Model, ModelRequest, ModelResponse, Usage
from loopstate.engine.recording.cassette import Cassette
from loopstate.engine.recording.replay import ReplayDivergence, ReplayModel, recorded_approver
from loopstate.engine.result import RunResult
from loopstate.engine.stores.memory import MemoryStore
from loopstate.engine.tool import Tool, ToolContext
from loopstate.machines.agent import Agent

Answer = dict[str, Any]
"""A model turn as the report shows it: its text and its calls (`tool(arguments)`)."""


class Departure(Frozen):
    """Where a run replayed from step `from_step` departs from its recording."""

    from_step: int
    first_divergent_step: int | None
    """The first live step whose answer differs from the recorded one (or that has no
    recorded counterpart, or a recorded one the new run never reached); None: no departure."""
    recorded_answer: Answer | None = None
    new_answer: Answer | None = None
    recorded_transitions: tuple[str, ...]
    new_transitions: tuple[str, ...]
    recorded_tool_calls: tuple[str, ...]
    new_tool_calls: tuple[str, ...]
    recorded_usage: Usage
    new_usage: Usage
    result: RunResult

    def lines(self) -> list[str]:
        """The report, recorded and new side by side."""
        step = self.first_divergent_step
        rows = [
            ("first divergent step", "", "none" if step is None else str(step)),
            ("answer", _shown(self.recorded_answer), _shown(self.new_answer)),
            ("transitions", str(len(self.recorded_transitions)), str(len(self.new_transitions))),
            ("tool calls", ", ".join(self.recorded_tool_calls), ", ".join(self.new_tool_calls)),
            ("tokens in/out", _tokens(self.recorded_usage), _tokens(self.new_usage)),
            ("cost", _cost(self.recorded_usage), _cost(self.new_usage)),
        ]
        width = max(len(r[1]) for r in rows) + 2
        head = f"{'':<22}{'recorded':<{width}}new (from step {self.from_step + 1})"
        return [head, *(f"{name:<22}{old:<{width}}{new}" for name, old, new in rows)]


class _PrefixModel:
    """The recorded turns up to `from_step` (checked as replay checks them), then `live`."""

    def __init__(self, tape: Cassette, live: Model, from_step: int) -> None:
        self.recorded = ReplayModel(tape)
        self.live, self.from_step = live, from_step
        self.answers: dict[int, ModelResponse] = {}

    @property
    def name(self) -> str:
        return self.live.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        model: Any = self.recorded if request.step <= self.from_step else self.live
        response: ModelResponse = await model.complete(request)
        self.answers[request.step] = response
        return response


async def replay_from(
    tape: Cassette,
    agent: Agent,
    from_step: int,
    opening: str | Sequence[Message],
) -> Departure:
    """Run `agent` on the recording's first `from_step` turns, then live; the report."""
    turns = tape.model_turns()
    if not 1 <= from_step <= len(turns):
        raise DefinitionError(
            f"from_step must be between 1 and {len(turns)} (the recording's model turns)"
        )
    prefix = {c["id"] for s in range(1, from_step + 1) for c in _calls(turns.get(s))}
    results = {k: v for k, v in tape.tool_results().items() if k in prefix}
    model = _PrefixModel(tape, agent.model, from_step)
    runs = tape.of_kind("run")
    run_id = runs[0]["run_id"] if runs else "replay"
    own = agent._options["approver"]
    live = agent.clone(
        model=model,
        tools=[_served(t, results) for t in agent.tools],
        ids=lambda: run_id,
        approver=_approver(recorded_approver(tape), own),
        store=MemoryStore(),
        hooks=None,
    )
    result = await live.run(opening)
    if model.recorded.divergence is not None:
        raise model.recorded.divergence.with_traceback(None) from None
    return _report(tape, from_step, model.answers, result)


def _served(tool: Tool, results: Mapping[str, Mapping[str, Any]]) -> Tool:
    """`tool`, serving the recorded result of a call from the served turns instead of running."""

    async def run(**kwargs: Any) -> str:
        ctx: ToolContext[Any] = kwargs.pop("_replay_ctx")
        record = results.get(ctx.call_id)
        if record is not None:
            return str(record["result"])
        return await tool.invoke(tool.args_model.model_construct(**kwargs), ctx)

    return dataclasses.replace(
        tool, fn=run, context_param="_replay_ctx", is_async=True, max_result_chars=10**9
    )


def _approver(recorded: Any, own: Any) -> Any:
    """The recorded decisions for the served turns' calls, the agent's approver for the rest
    (none: those calls wait, as they would in any run)."""

    async def approver(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        decided: dict[str, Decision] = dict(await recorded(requests))
        rest = [r for r in requests if r.call_id not in decided]
        if rest and own is not None:
            answer = own(rest)
            decided.update(await answer if hasattr(answer, "__await__") else answer)
        return decided

    return approver


def _calls(turn: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if turn is None:
        return []
    return list(turn["response"]["message"].get("tool_calls") or [])


def _answer_of(message: Mapping[str, Any]) -> Answer:
    calls = [f"{c['function']['name']}({c['function']['arguments']})"
             for c in message.get("tool_calls") or []]  # fmt: skip
    return {"text": message.get("content"), "calls": calls}


def _report(
    tape: Cassette, from_step: int, answers: Mapping[int, ModelResponse], result: RunResult
) -> Departure:
    turns = tape.model_turns()
    recorded = {s: _answer_of(t["response"]["message"]) for s, t in turns.items()}
    new = {s: _answer_of(r.message.model_dump(mode="json")) for s, r in answers.items()}
    steps = sorted(s for s in {*recorded, *new} if s > from_step)
    first = next((s for s in steps if recorded.get(s) != new.get(s)), None)
    usage = Usage()
    for turn in turns.values():
        usage = usage + Usage.model_validate(turn["response"].get("usage") or {})
    return Departure(
        from_step=from_step,
        first_divergent_step=first,
        recorded_answer=None if first is None else recorded.get(first),
        new_answer=None if first is None else new.get(first),
        recorded_transitions=tuple(
            f"{t['source']}→{t['target']}" for t in tape.of_kind("transition")
        ),
        new_transitions=tuple(f"{t.source}→{t.target}" for t in result.transitions),
        recorded_tool_calls=tuple(c for s in sorted(recorded) for c in recorded[s]["calls"]),
        new_tool_calls=tuple(c for s in sorted(new) for c in new[s]["calls"]),
        recorded_usage=usage,
        new_usage=result.usage,
        result=result,
    )


def _shown(answer: Answer | None) -> str:
    if answer is None:
        return "-"
    parts = [*(answer["calls"] or []), *([repr(answer["text"])] if answer["text"] else [])]
    text = "; ".join(parts) or "(empty)"
    return text if len(text) <= 60 else text[:59] + "…"


def _tokens(usage: Usage) -> str:
    return f"{usage.prompt_tokens}/{usage.completion_tokens}"


def _cost(usage: Usage) -> str:
    return "-" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"


__all__ = ["Departure", "ReplayDivergence", "replay_from"]
