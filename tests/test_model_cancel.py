"""A cancelled model call is a cancellation, never a model failure: the task awaiting
`LiteLLMModel.complete` or `stream` gets `CancelledError` and the connection is closed, on the
fast path (the second call of a request shape) and through `litellm.acompletion`
(`direct=False`). (litellm's aiohttp transport turns a `CancelledError` of a task that is not
being cancelled into a connection error; a cancelled caller's task always is.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog
from model_server import serve, stalled, text_reply

from loopstate.engine.messages import UserMessage
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm

ASK = ModelRequest(messages=(UserMessage(content="hi"),))


class Ignored:
    """A stream's listener that keeps nothing."""

    async def text(self, text: str) -> None:
        pass

    async def tool_call(self, index: int, cid: str | None, name: str | None, args: str) -> None:
        pass

    def new_attempt(self) -> None:
        pass


async def call(model: LiteLLMModel, streamed: bool) -> ModelResponse:
    return await (model.stream(ASK, Ignored()) if streamed else model.complete(ASK))


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("direct", [True, False], ids=["fast_path", "litellm"])
async def test_cancelling_the_task_mid_call_raises_cancelled_error(
    direct: bool, streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm, through_litellm = _import_litellm(), []

    async def counted(**arguments: Any) -> Any:
        through_litellm.append(arguments["model"])
        return await original(**arguments)

    original = litellm.acompletion
    monkeypatch.setattr(litellm, "acompletion", counted)
    with serve(text_reply("first"), stalled()) as server, structlog.testing.capture_logs() as logs:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="k",
                             direct=direct)  # fmt: skip
        await call(model, streamed)  # the fast path (direct) makes the next call of this shape
        pending = asyncio.create_task(call(model, streamed))
        await asyncio.to_thread(server.wait_for_requests, 2)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        await asyncio.to_thread(server.wait_for_disconnects, 1)  # the call was cut off
    assert len(through_litellm) == (1 if direct else 2)
    assert [line["event"] for line in logs if line["log_level"] != "debug"] == []
