"""Streaming, optional and separate: a model port that can also stream, the deltas it reports,
and the relay that turns them into typed delta events for whoever listens.

A step streams only when someone listens (a hook with `on_text_delta`/`on_tool_call_delta`,
or `agent.stream(...)`) and the model can (`StreamingModel`); otherwise it is the plain
`complete` call. Either way the step's outcome is the assembled `ModelResponse`: deltas are
never stored, so a streamed run's store and cassette equal the non-streamed run's.

Each delta names its run, step and `attempt`: an id minted for every model call attempt (a
retry, or the same step called again after its process died). A listener that sees a new
attempt for a step it has shown text of drops that text: it was never part of the run.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import Field

from loopstate.engine.data import Frozen
from loopstate.engine.messages import AssistantMessage
from loopstate.engine.model import ModelRequest, ModelResponse

_PIECES = re.compile(r"\s*\S+|\s+")


class _Delta(Frozen):
    run_id: str
    at: float
    step: int
    attempt: str
    """Unique per model call attempt: a new one means the step's earlier deltas are void."""


class TextDelta(_Delta):
    """A piece of the model's answer text, as it arrives."""

    kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallDelta(_Delta):
    """A piece of a tool call as it arrives: `index` is the call's place in the turn; `call_id`
    and `tool` come with its first piece (the provider's id: the stored call gets a run-unique
    one), `arguments` is the next fragment of its JSON arguments. The complete, validated
    arguments come with `approval_requested` and `tool_started`."""

    kind: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    call_id: str | None = None
    tool: str | None = None
    arguments: str = ""


Delta = Annotated[TextDelta | ToolCallDelta, Field(discriminator="kind")]


class DeltaListener(Protocol):
    """What a streaming model reports to, as chunks arrive."""

    async def text(self, text: str) -> None:
        """A piece of answer text."""

    async def tool_call(
        self, index: int, call_id: str | None, tool: str | None, arguments: str
    ) -> None:
        """A piece of tool call `index` (its id and name with the first piece)."""

    def new_attempt(self) -> None:
        """What was reported so far is void: the call is made again (a retry)."""


@runtime_checkable
class StreamingModel(Protocol):
    """A model port that can also stream one turn, reporting deltas to `listener` and
    returning the same assembled `ModelResponse` its `complete` would."""

    @property
    def name(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse: ...


class DeltaSink(Protocol):
    """Where delta events go (a `HookChain`)."""

    async def on_text_delta(self, delta: TextDelta) -> None: ...
    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None: ...


async def report_reply(message: AssistantMessage, listener: DeltaListener) -> None:
    """Report a whole reply as deltas, as a provider would stream it (scripted and replayed
    models): its text word by word, then each call's id and name with the first half of its
    arguments, and the second half."""
    for piece in _PIECES.findall(message.content or ""):
        await listener.text(piece)
    for index, call in enumerate(message.calls):
        arguments = call.function.arguments
        half = len(arguments) // 2
        await listener.tool_call(index, call.id, call.function.name, arguments[:half])
        if arguments[half:]:
            await listener.tool_call(index, None, None, arguments[half:])


def new_attempt_id() -> str:
    return secrets.token_hex(6)


class DeltaRelay:
    """The engine's `DeltaListener` for one step: delta events naming the run, step and
    attempt, handed to `sink`."""

    def __init__(self, run_id: str, step: int, clock: Callable[[], float], sink: DeltaSink) -> None:
        self._run_id, self._step, self._clock, self._sink = run_id, step, clock, sink
        self.attempt = new_attempt_id()

    async def text(self, text: str) -> None:
        if text:
            # fleeting: one delta per chunk, its fields already typed, handed on
            await self._sink.on_text_delta(
                TextDelta.fleeting(
                    run_id=self._run_id,
                    at=self._clock(),
                    step=self._step,
                    attempt=self.attempt,
                    kind="text_delta",
                    text=text,
                )
            )

    async def tool_call(
        self, index: int, call_id: str | None, tool: str | None, arguments: str
    ) -> None:
        await self._sink.on_tool_call_delta(
            ToolCallDelta.fleeting(
                run_id=self._run_id,
                at=self._clock(),
                step=self._step,
                attempt=self.attempt,
                kind="tool_call_delta",
                index=index,
                call_id=call_id,
                tool=tool,
                arguments=arguments,
            )
        )

    def new_attempt(self) -> None:
        self.attempt = new_attempt_id()
