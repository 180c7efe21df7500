"""Counting a message's tokens with litellm's counter (imported when first used: 2–4 s, when a
budget is first used)."""

from __future__ import annotations

from collections.abc import Callable

from loopstate.engine.messages import Message, Origin
from loopstate.engine.models.wire import provider_messages

_NO_ORIGIN = Origin(provider="", model="")
"""No model's own turn: each is counted as plain text and tool calls."""


def litellm_counter(model: str) -> Callable[[Message], int]:
    """A function counting one message's tokens the way `model`'s tokenizer does (litellm
    falls back to a generic tokenizer for a model it does not know)."""

    def count(message: Message) -> int:
        from loopstate.engine.models.litellm import _import_litellm

        wire = provider_messages((message,), _NO_ORIGIN)
        return int(_import_litellm().token_counter(model=model, messages=wire))

    return count
