"""The `messages` and `system` of an Anthropic request, made by litellm's own functions for
only what a run's history gained since its last call (`anthropic_direct.py` uses it).

litellm turns chat-completions messages into Anthropic's in two stages, every call over the
whole history: per message (`validate_and_fix_openai_messages`, `get_completion_messages`),
then `anthropic_messages_pt`, which walks the conversation in rounds — a run of user and tool
messages, then a run of assistant messages — each round made into at most one user and one
assistant turn from its own messages alone; only the last turn of all is touched afterwards
(a final assistant turn loses trailing whitespace). So for the plain histories the thin path
admits (no system message after the leading ones, `modify_params` off: then litellm's
sanitizing and mid-conversation placement change nothing), the turns of the rounds a history
has closed are those of the same rounds transformed apart, provided the last of them does
not end in whitespace. A history keeps its per-message results and its closed rounds' turns;
a call transforms the new messages and the rounds not yet closed, then closes what it can.

tests/test_anthropic_history.py compares this with litellm's whole transform for every
prefix of varied histories; tests/test_anthropic_thin_path.py the requests on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopstate.engine.messages import Message, Origin
from loopstate.engine.models.history_cache import HistoryCache
from loopstate.engine.models.wire import provider_messages

_USER = frozenset({"user", "tool", "function"})


@dataclass(frozen=True)
class _Done:
    """What was made of a history: its messages, their call ids on the wire, litellm's
    per-message results, the leading system run's count and `system` value, and the turns
    of the first `closed` conversation messages."""

    source: tuple[Message, ...]
    wire_ids: dict[str, str]
    fixed: tuple[dict[str, Any], ...]
    lead: int
    system: list[Any]
    closed: int
    turns: tuple[dict[str, Any], ...]


_EMPTY = _Done((), {}, (), 0, [], 0, ())


class Histories:
    """What the last histories of one model were made into (`history_cache.py`)."""

    def __init__(self, config: Any, model: str) -> None:
        self._config = config
        self._model = model
        self._done = HistoryCache(_EMPTY)

    def request_messages(
        self, messages: tuple[Message, ...], origin: Origin, plain: Any
    ) -> tuple[list[Any], list[Any], list[dict[str, Any]]] | None:
        """(system, turns, the chat-completions messages litellm's transform was given) for
        `messages`, or None when they are not plain (`plain(new)` is False) or not a
        conversation this admits."""
        last = self._done.last(messages)
        wire_ids = dict(last.wire_ids)
        new = provider_messages(messages[len(last.source) :], origin, wire_ids)
        if not plain(new):
            return None
        fixed = (*last.fixed, *self._fixed(new))
        lead, system = last.lead, last.system
        if not last.source:
            lead = next((i for i, m in enumerate(fixed) if m["role"] != "system"), len(fixed))
            system = self._system(fixed[:lead])
        conversation = fixed[lead:]
        if not conversation or any(m["role"] == "system" for m in conversation):
            return None
        tail = self._turns(conversation[last.closed :])
        done = _Done(messages, wire_ids, fixed, lead, system, last.closed, last.turns)
        self._done.keep(self._close(done, conversation))
        return system, [*last.turns, *tail], list(fixed)

    @staticmethod
    def _fixed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from litellm.litellm_core_utils.prompt_templates.common_utils import (
            get_completion_messages,
        )
        from litellm.utils import validate_and_fix_openai_messages

        fixed: list[Any] = validate_and_fix_openai_messages(messages=messages)
        made: list[Any] = get_completion_messages(
            messages=fixed, ensure_alternating_roles=False, user_continue_message=None,
            assistant_continue_message=None,
        )  # fmt: skip
        return made

    def _system(self, leading: tuple[dict[str, Any], ...]) -> list[Any]:
        from litellm.litellm_core_utils.prompt_templates.mid_conversation_system import (
            split_leading_system_run,
        )

        run, rest = split_leading_system_run(list(leading))
        assert not rest
        return list(self._config.translate_system_message(messages=list(run)))

    def _turns(self, conversation: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
        """`anthropic_messages_pt` of these messages, then `strip_advisor_blocks_from_messages`
        (turn by turn; the thin path sends no advisor tool)."""
        from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt
        from litellm.llms.anthropic.common_utils import strip_advisor_blocks_from_messages

        given: list[Any] = list(conversation)  # litellm's message TypedDicts, as plain dicts
        turns: list[Any] = anthropic_messages_pt(
            model=self._model, messages=given, llm_provider=self._config._resolved_provider
        )
        return list(strip_advisor_blocks_from_messages(turns))

    def _close(self, done: _Done, conversation: tuple[dict[str, Any], ...]) -> _Done:
        """`done` with the rounds before the last one closed, if their last turn keeps its
        text as it is (a history's final assistant turn loses trailing whitespace)."""
        cut = next(
            (
                i
                for i in range(len(conversation) - 1, done.closed, -1)
                if conversation[i]["role"] in _USER and conversation[i - 1]["role"] == "assistant"
            ),
            None,
        )
        if cut is None or not _unstripped(conversation[:cut]):
            return done
        closed = self._turns(conversation[done.closed : cut])
        return _Done(
            done.source, done.wire_ids, done.fixed, done.lead, done.system, cut,
            (*done.turns, *closed),
        )  # fmt: skip


def _unstripped(conversation: tuple[dict[str, Any], ...]) -> bool:
    """Whether the text of the last assistant run ends without whitespace (so making it the
    final turn of a transform changes nothing)."""
    for message in reversed(conversation):
        if message["role"] != "assistant":
            return True
        content = message.get("content")
        if isinstance(content, str) and content != content.rstrip():
            return False
    return True
