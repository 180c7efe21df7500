"""What a failed model call tells its caller, over real HTTP to a model server on 127.0.0.1:
a reply that came but cannot be read, a model without credentials, a refused key. None of
them is worth retrying; only a call that got no reply is a `connection` error."""

from __future__ import annotations

from typing import Any

import provider_replies as pr
import pytest
from model_server import Reply, dropped_connection, raw_reply, serve, text_reply

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import UserMessage
from loopstate.engine.model import ModelRequest
from loopstate.engine.models.litellm import LiteLLMModel

ASK = ModelRequest(messages=(UserMessage(content="Hi"),))
MALFORMED = {
    "a proxy's html page": Reply(raw=b"<html><body>502 Bad Gateway</body></html>"),
    "json that is no completion": Reply(raw=b'{"status": "ok"}'),
}


def _model(provider: str, base: str, **settings: Any) -> LiteLLMModel:
    name = {
        "openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-sonnet-4-5",
        "groq": "groq/openai/gpt-oss-20b",
    }[provider]  # fmt: skip
    return LiteLLMModel(name, api_base=base, **settings)


async def _failure(model: LiteLLMModel) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await model.complete(ASK)
    return caught.value


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED)
@pytest.mark.parametrize("provider", ["openai", "anthropic", "groq"])
@pytest.mark.parametrize("direct", [False, True], ids=["litellm", "fast path"])
async def test_a_200_reply_that_cannot_be_read_is_a_bad_response(
    provider: str, reply: Reply, direct: bool
) -> None:
    warm = raw_reply(pr.groq("Warm.")) if provider == "groq" else text_reply("warm")
    with serve(warm, reply) as server:
        base = server.url if provider == "anthropic" else server.openai_base
        model = _model(provider, base, api_key="k", direct=direct)
        await model.complete(ASK)  # the fast path's template, when on
        error = await _failure(model)
    assert (error.status, error.error_type, error.retryable) == (None, "bad_response", False)
    assert len(server.requests) == 2  # never sent again


async def test_a_model_without_an_api_key_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with serve() as server:
        openai_error = await _failure(_model("openai", server.openai_base))
        anthropic_error = await _failure(_model("anthropic", server.url))
    assert (openai_error.error_type, openai_error.retryable) == ("configuration", False)
    assert (anthropic_error.status, anthropic_error.retryable) == (401, False)
    assert "API Key" in str(anthropic_error)
    assert not server.requests


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_not_retried(status: int) -> None:
    with serve(Reply(status=status)) as server:
        error = await _failure(_model("openai", server.openai_base, api_key="k"))
    assert (error.status, error.retryable) == (status, False)


async def test_only_a_call_that_got_no_reply_is_a_connection_error() -> None:
    with serve(dropped_connection()) as server:
        error = await _failure(_model("openai", server.openai_base, api_key="k"))
    assert (error.status, error.error_type, error.retryable) == (None, "connection", True)


async def test_the_fast_path_names_itself_as_litellms_own_client_does() -> None:
    with serve(text_reply("one"), text_reply("two"), text_reply("three")) as server:
        own = _model("openai", server.openai_base, api_key="k", direct=False)
        await own.complete(ASK)
        fast = _model("openai", server.openai_base, api_key="k")
        await fast.complete(ASK)
        await fast.complete(ASK)
    agents = [r.headers["user-agent"] for r in server.requests]
    assert agents[0].startswith("AsyncOpenAI/Python ")
    assert agents == [agents[0]] * 3
