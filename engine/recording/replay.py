"""Replay a cassette: the model's turns, tool results and decisions, with no network and no
side effects; stop at the first request that differs from the recording, and show the diff."""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, TypeAdapter, create_model

from loopstate.engine.approval import ApprovalRequest, Decision
from loopstate.engine.errors import LoopstateError
from loopstate.engine.model import Model, ModelRequest, ModelResponse
from loopstate.engine.recording.cassette import Cassette, Digester, request_record
from loopstate.engine.streaming import DeltaListener, StreamingModel, report_reply
from loopstate.engine.tool import Tool, ToolContext

_DECISION: TypeAdapter[Decision] = TypeAdapter(Decision)


class ReplayDivergence(LoopstateError):
    """The run being replayed asked for something other than what was recorded."""

    def __init__(self, step: int, what: str, expected: Any = None, actual: Any = None) -> None:
        self.step, self.what = step, what
        message = f"replay diverged at step {step}: {what}"
        if expected is not None or actual is not None:
            message += "\n" + unified(expected, actual)
        super().__init__(message)


def unified(expected: Any, actual: Any) -> str:
    def lines(value: Any) -> list[str]:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    diff = difflib.unified_diff(
        lines(expected), lines(actual), "recorded", "this run", lineterm="", n=3
    )
    return "\n".join(diff)


def load(cassette: Cassette | str | Path) -> Cassette:
    return cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)


class ReplayModel:
    """Serves recorded model turns by step, after checking each request against the recording.

    On a difference it raises `ReplayDivergence` (also kept in `divergence`), or, given a
    `fallback` model, hands that step and every later one to the fallback.
    """

    def __init__(self, cassette: Cassette | str | Path, *, fallback: Model | None = None) -> None:
        self.cassette = load(cassette)
        self.turns = self.cassette.model_turns()
        self.fallback = fallback
        self.divergence: ReplayDivergence | None = None
        self.replayed = 0
        self._digester = Digester()

    @property
    def name(self) -> str:
        return f"replay:{self.cassette.header.get('model') or 'model'}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.divergence is not None and self.fallback is not None:
            return await self.fallback.complete(request)
        turn = self.turns.get(request.step)
        if turn is None:
            found = ReplayDivergence(request.step, f"no recorded turn (it has {len(self.turns)})")
        elif self._digester.digest(request) != turn["digest"]:
            found = ReplayDivergence(
                request.step,
                "the request differs from the recording",
                turn["request"],
                request_record(request),
            )
        else:
            self.replayed += 1
            return ModelResponse.model_validate(turn["response"])
        self.divergence = found
        if self.fallback is not None:
            return await self.fallback.complete(request)
        raise found

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        """The recorded reply re-streamed as deltas (so UI code is tested with no model);
        past a divergence, the fallback's stream if it can."""
        if self.divergence is None or self.fallback is None:
            response = await self.complete(request)
            await report_reply(response.message, listener)
            return response
        if isinstance(self.fallback, StreamingModel):
            return await self.fallback.stream(request, listener)
        return await self.fallback.complete(request)


def stand_in_tools(cassette: Cassette, tools: Sequence[Tool] | None = None) -> list[Tool]:
    """Tools that return the recorded results instead of running: no side effects. They show
    the model the schemas of `tools` (an agent's real tools, so a changed tool set diverges)
    or, without them, the recorded schemas; they are gated exactly where the recording had a
    person (or policy) decide."""
    results = cassette.tool_results()
    gated = {cid for cid, d in cassette.decisions().items() if d["decision"]["kind"] != "auto"}
    if tools is not None:
        shapes = [(t.name, t.description, t.args_model, t.definition.parameters) for t in tools]
    else:
        turns = cassette.model_turns()
        recorded = turns[min(turns)]["request"]["tools"] if turns else []
        shapes = [
            (d["name"], d["description"], _any_arguments(d["name"]), d["parameters"])
            for d in recorded
        ]

    async def play(ctx: ToolContext[Any], **_: Any) -> str:
        record = results.get(ctx.call_id)
        if record is None:
            raise ReplayDivergence(0, f"no recorded result for call {ctx.call_id} ({ctx.tool})")
        text: str = record["result"]
        return text

    return [
        Tool(
            name=name,
            description=description,
            args_model=args_model,
            fn=play,
            context_param="ctx",
            needs_approval=lambda args, ctx: ctx.call_id in gated,
            is_async=True,
            max_result_chars=10**9,  # the recording is already truncated
            parameters=parameters,
        )
        for name, description, args_model, parameters in shapes
    ]


def recorded_approver(cassette: Cassette, *children: Cassette) -> Any:
    """The decisions recorded in `cassette` (and in its `children`'s, the cassettes of the
    sub-agents' runs, whose calls the top-level approver decided), by call id and tool."""
    decisions = {
        (cid, d["tool"]): _DECISION.validate_python(d["decision"])
        for tape in (cassette, *children)
        for cid, d in tape.decisions().items()
        if d["decision"]["kind"] != "auto"
    }

    async def approver(requests: list[ApprovalRequest]) -> Mapping[str, Decision]:
        return {
            r.call_id: decisions[r.call_id, r.tool]
            for r in requests
            if (r.call_id, r.tool) in decisions
        }

    return approver


@functools.lru_cache(maxsize=256)  # building a pydantic model costs more than a replayed step
def _any_arguments(name: str) -> Any:
    return create_model(f"{name}_replayed", __config__=ConfigDict(extra="allow"))
