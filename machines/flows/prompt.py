"""What a phase's model sees: the whole conversation under the current phase's instructions.

Each phase turn appends its rendered instructions to the history as a system message (so the
audit shows what every model was told). The model is shown only the latest of them, first.
"""

from __future__ import annotations

from loopstate.engine.messages import Message


def phase_view(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The latest system message first, then every other message in order."""
    system = [m for m in messages if m.role == "system"]
    return (*system[-1:], *(m for m in messages if m.role != "system"))
