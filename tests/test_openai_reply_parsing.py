"""The thin path reads a chat completion with strict validation instead of the OpenAI SDK's
`construct` (`openai_client.parsed`): for every recorded provider body, the same model
dumped to the same dict, keys in the same order; a body strict validation refuses (or not
JSON) is left to the SDK, so it reads as the SDK reads it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import provider_replies as pr
import pytest
from model_server import openai_body, text_reply, tool_call_reply
from openai import AsyncOpenAI
from openai._legacy_response import LegacyAPIResponse
from openai._models import FinalRequestOptions, construct_type
from openai.types.chat import ChatCompletion

from loopstate.engine.models.openai_client import parsed

BODIES = {
    "text": openai_body(text_reply("Done, ünïcode ✓."), "gpt-4o-mini"),
    "tool call": openai_body(tool_call_reply(("c1", "read_file", {"path": "a"})), "gpt-4o-mini"),
    "openai cached + reasoning": pr.openai(
        "o4-mini", pr.deepseek_call(0, "a.py"), prompt=3000, cached=1920, reasoning=64
    ),
    "deepseek reasoning": pr.deepseek("Look.", pr.deepseek_call(0, "a.py")),
    "groq reasoning": pr.groq("Thinking.", pr.gemini_call("c.py", call_id="x")),
    "gemini ids and signatures": pr.gemini_compat(
        pr.gemini_call("a.py", signature="sig=="), pr.gemini_call("b.py"), text="Two."
    ),
}


def _reply(body: Any, content_type: str = "application/json") -> LegacyAPIResponse[Any]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = httpx.Response(200, content=content, headers={"content-type": content_type})
    client = AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    options = FinalRequestOptions(method="post", url="/chat/completions")
    return LegacyAPIResponse(
        raw=response, client=client, cast_to=ChatCompletion, stream=False, stream_cls=None,
        options=options, retries_taken=0,
    )  # fmt: skip


def _dumped(model: Any) -> str:
    return json.dumps(model.model_dump())  # keys in order: the next request carries them


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_a_recorded_reply_reads_as_the_sdk_constructs_it(body: dict[str, Any]) -> None:
    ours = parsed(_reply(body))
    assert _dumped(ours) == _dumped(construct_type(type_=ChatCompletion, value=body))
    assert (
        ours.__pydantic_fields_set__
        == construct_type(type_=ChatCompletion, value=body).__pydantic_fields_set__
    )  # type: ignore[attr-defined]


def test_what_strict_validation_refuses_reads_as_the_sdk_reads_it() -> None:
    loose = {**BODIES["text"], "created": "1731000000"}  # a string where the SDK types int
    assert _dumped(parsed(_reply(loose))) == _dumped(_reply(loose).parse())
    assert parsed(_reply(loose)).created == "1731000000"  # kept as sent, as construct keeps it
    assert parsed(_reply(b"upstream busy", "text/plain")) == "upstream busy"
