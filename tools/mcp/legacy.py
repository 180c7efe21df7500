"""Questions a pre-2026 server asks in the middle of a call (`elicitation/create` while the
`tools/call` is open), made durable the only way they can be: the question is put to
`ctx.ask`; unanswered, the server is told "cancel", its result is set aside, and the run
suspends; once answered, the call is made again and the repeated question gets the recorded
answer at once. Attributed to the one call in flight on the session; with several, nobody can
tell whose it is, and it is cancelled (2026-07-28 servers ask through the call's result and
need none of this)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult, ErrorData

from loopstate.engine.tool import AskPending, ToolContext


@dataclass
class Asking:
    """One call in flight: its context, and the question it left unanswered, if any."""

    ctx: ToolContext[Any]
    pending: AskPending | None = None


class MidCallQuestions:
    """The calls in flight on one server's sessions, and the session's elicitation callback."""

    def __init__(self) -> None:
        self._calls: list[Asking] = []

    @contextmanager
    def calling(self, ctx: ToolContext[Any]) -> Iterator[Asking]:
        asking = Asking(ctx)
        self._calls.append(asking)
        try:
            yield asking
        finally:
            self._calls.remove(asking)

    async def answer(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        if len(self._calls) != 1 or not isinstance(params, ElicitRequestFormParams):
            return ElicitResult(action="cancel")
        asking = self._calls[0]
        try:
            schema = dict(params.requested_schema)
            answer = await asking.ctx.ask(params.message, schema=schema)
        except AskPending as pending:
            asking.pending = pending
            return ElicitResult(action="cancel")
        return ElicitResult(action="accept", content=answer)
