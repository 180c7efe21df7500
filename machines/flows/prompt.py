"""What a phase's model sees: the whole conversation under the current phase's instructions.

Each phase turn appends its rendered instructions to the history as a system message (so the
audit shows what every model was told). The model is shown only the latest of them, first.
"""

from __future__ import annotations

from loopstate.engine.messages import Message
from loopstate.engine.model import Model, ModelRequest, ModelResponse


def phase_view(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The latest system message first, then every other message in order."""
    system = [m for m in messages if m.role == "system"]
    return (*system[-1:], *(m for m in messages if m.role != "system"))


class PhaseModel:
    """A model port in front of a phase's model: it sends `phase_view` of the history."""

    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def name(self) -> str:
        return self.model.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.model.complete(request.evolve(messages=phase_view(request.messages)))
