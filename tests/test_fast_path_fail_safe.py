"""The fast path fails safe: when litellm's or the SDK's contract no longer fits (a name moved,
a signature changed), the model goes through `litellm.acompletion` for the rest of the
process, says so once (`fast_path_disabled`), and the call succeeds; a provider's own failure
stays a `ModelError`. Over real HTTP to a model server on 127.0.0.1."""

from __future__ import annotations

import sys
from typing import Any

import provider_replies as pr
import pytest
import structlog
from model_server import error_reply, raw_reply, serve, text_reply
from support.listening import Listener
from thin_support import Counting

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import UserMessage
from loopstate.engine.model import ModelRequest
from loopstate.engine.models import litellm_errors
from loopstate.engine.models.litellm import LiteLLMModel, _import_litellm

NAMES = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-sonnet-4-5"}
ASK = ModelRequest(messages=(UserMessage(content="Hi"),))


def _disabled(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == "fast_path_disabled"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_contract_that_no_longer_fits_sends_the_model_through_litellm(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopstate.engine.models import provider_path

    replies = [text_reply(f"reply {n}") for n in range(4)]
    with serve(*replies) as server, Counting() as counting:
        base = server.openai_base if provider == "openai" else server.url
        model = LiteLLMModel(NAMES[provider], api_base=base, api_key="k")
        await model.complete(ASK)  # through litellm: the shape's template
        await model.complete(ASK)  # the fast path
        assert counting.reached == 1
        # A name the fast path borrows is gone, as after an upgrade that moved it.
        monkeypatch.delattr(provider_path, "eligible")
        with structlog.testing.capture_logs() as logs:
            third = await model.complete(ASK)
            fourth = await model.complete(ASK)
    assert (third.message.content, fourth.message.content) == ("reply 2", "reply 3")
    assert counting.reached == 3
    (line,) = _disabled(logs)
    assert line["model"] == NAMES[provider]
    assert line["reason"].startswith(("ImportError: ", "NameError: "))


async def test_a_fast_path_module_that_cannot_be_imported_leaves_calls_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _import_litellm()
    # As if a name it imports had moved: importing the fast path fails.
    monkeypatch.setitem(sys.modules, "loopstate.engine.models.provider_path", None)
    with serve(text_reply("one"), text_reply("two"), text_reply("three")) as server:
        off = LiteLLMModel("openai/m", api_base=server.openai_base, api_key="k", direct=False)
        on = LiteLLMModel("openai/m", api_base=server.openai_base, api_key="k")
        with structlog.testing.capture_logs() as logs:
            assert (await off.complete(ASK)).message.content == "one"
            assert not _disabled(logs)  # direct=False never builds a fast path
            assert (await on.complete(ASK)).message.content == "two"
            assert (await on.complete(ASK)).message.content == "three"
    (line,) = _disabled(logs)
    assert line["reason"].startswith(("ImportError", "ModuleNotFoundError"))


async def test_a_model_with_direct_off_is_handed_no_client_of_loopstates() -> None:
    seen: list[Any] = []
    litellm = _import_litellm()
    original = litellm.acompletion

    async def spy(**arguments: Any) -> Any:
        seen.append(arguments.get("client"))
        return await original(**arguments)

    with serve(text_reply("a"), raw_reply(pr.groq("Thinking."))) as server:
        litellm.acompletion = spy
        try:
            for name in ("openai/m", "groq/m"):
                base = server.openai_base
                await LiteLLMModel(name, api_base=base, api_key="k", direct=False).complete(ASK)
        finally:
            litellm.acompletion = original
    assert seen == [None, None]


async def test_a_provider_failure_on_the_fast_path_stays_a_model_error() -> None:
    with serve(text_reply("first"), error_reply(503)) as server, Counting() as counting:
        model = LiteLLMModel("openai/m", api_base=server.openai_base, api_key="k")
        await model.complete(ASK)
        with structlog.testing.capture_logs() as logs, pytest.raises(ModelError) as caught:
            await model.complete(ASK)
    assert (caught.value.status, caught.value.retryable) == (503, True)
    assert counting.reached == 1  # answered by the fast path, not sent again through litellm
    assert not _disabled(logs)


def test_a_failure_caused_by_code_that_no_longer_fits_is_not_the_providers() -> None:
    import httpx

    wrapped = httpx.ConnectError("wrapped")
    wrapped.__cause__ = ImportError("cannot import name 'LegacyAPIResponse'")
    assert not litellm_errors.provider_failure(wrapped)
    assert litellm_errors.provider_failure(httpx.ConnectError("refused"))
    assert not litellm_errors.provider_failure(KeyError("choices"))


class _Voided(Listener):
    """Hears when the deltas so far are void (the call is made again), and forgets them."""

    def __init__(self) -> None:
        super().__init__()
        self.voided = 0

    def new_attempt(self) -> None:
        self.voided += 1
        self.seen.clear()


async def test_a_contract_that_breaks_mid_stream_voids_the_deltas_and_litellm_streams_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopstate.engine.models import provider_stream

    def moved(*arguments: Any) -> Any:
        raise AttributeError("'OpenAIGPTConfig' has no attribute 'get_model_response_iterator'")

    with (
        serve(*[text_reply(t) for t in ("first", "second", "second")]) as server,
        Counting() as counting,
    ):
        model = LiteLLMModel(NAMES["openai"], api_base=server.openai_base, api_key="k")
        await model.stream(ASK, Listener())  # through litellm: the shape's template
        # The fast path reports the deltas, then checks its first plain stream with litellm's
        # iterator, whose name is gone, as after an upgrade that moved it.
        monkeypatch.setattr(provider_stream, "stream_iterator", moved)
        listener = _Voided()
        with structlog.testing.capture_logs() as logs:
            reply = await model.stream(ASK, listener)
    assert reply.message.content == "second"
    assert listener.voided == 1  # what the fast path reported, then litellm's stream
    assert "".join(str(delta[1]) for delta in listener.seen) == "second"
    assert counting.reached == 2
    (line,) = _disabled(logs)
    assert line["reason"].startswith("AttributeError")
