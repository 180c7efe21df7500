"""Text that JSON can carry but UTF-8 cannot (lone surrogates) from a model or a tool is made
storable where it enters the run: the run ends as it should, and the store agrees."""

from __future__ import annotations

from pathlib import Path

from model_server import serve, text_reply, tool_call_reply

from loopstate import Agent, Approve, ScriptedModel, tool
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.sanitize import storable, storable_text
from loopstate.engine.stores.sqlite import SQLiteStore

LONE = "\ud800"


@tool
def echo(text: str) -> str:
    """Return the text."""
    return f"echo {text}"


@tool
def leaky() -> str:
    """Returns bytes decoded with surrogateescape, as a careless tool would."""
    return b"bad \xff byte".decode("utf-8", "surrogateescape")


@tool(needs_approval=True)
def publish(text: str) -> str:
    """Publish the text."""
    return f"published {text}"


def test_a_lone_surrogate_becomes_the_replacement_character_and_a_split_pair_is_joined() -> None:
    assert storable_text(f"a{LONE}b") == "a\ufffdb"
    assert storable_text("\ud83d\ude00") == "😀"
    plain = {"k": ["v", ("w",)]}
    assert storable(plain) is plain


async def test_a_reply_over_http_with_lone_surrogates_ends_done_and_the_file_agrees(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with serve(
        # a raw surrogate in the argument text, and an escaped one inside its JSON
        tool_call_reply(
            (f"call{LONE}1", "echo", f'{{"text": "x{LONE}"}}'),
            ("call_2", "echo", '{"text": "y\\udc00"}'),
            ("call_3", "leaky", "{}"),
            text=f"thinking {LONE}",
        ),
        text_reply(f"done {LONE}"),
    ) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.openai_base, api_key="sk-test")
        result = await Agent(model, [echo, leaky], store=SQLiteStore(db)).run("go")
        results = [m["content"] for m in server.bodies[1]["messages"] if m["role"] == "tool"]
    assert result.status == "done", result.error
    assert result.output == "done \ufffd"
    assert results == ["echo x\ufffd", "echo y\ufffd", "bad \ufffd byte"]
    stored = await SQLiteStore(db).load(result.run_id)
    assert (stored.status, stored.output) == (result.status, result.output)
    assert stored.messages == result.messages


async def test_a_gated_call_with_a_lone_surrogate_suspends_and_resumes_from_the_file(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    script = [calls(call("publish", f'{{"text": "hi{LONE}"}}', id="c1")), "published"]
    agent = Agent(ScriptedModel(script, by_step=True), [publish], store=SQLiteStore(db))
    suspended = await agent.run("go")
    assert suspended.status == "awaiting_approval"
    assert suspended.pending[0].arguments == {"text": "hi\ufffd"}
    later = agent.clone(store=SQLiteStore(db))
    decision = Approve(digest=suspended.pending[0].digest)
    result = await later.resume(suspended.run_id, decisions={"c1": decision})
    assert result.status == "done", result.error
    assert result.messages[-2].content == "published hi\ufffd"
    assert (await SQLiteStore(db).load(result.run_id)).status == "done"
