"""Record runs to cassettes and replay them: no network, no side effects, divergence diffs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from model_server import serve, text_reply, tool_call_reply
from support import make_tools

from loopstate import Agent, Approve, Deny, Edit, LiteLLMModel, ScriptedModel
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.recording.recorder import Recorder
from loopstate.engine.recording.replay import ReplayDivergence
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.replay import replay

SCRIPT = [
    calls(
        call("read_file", {"path": "a"}),
        call("write_file", {"path": "b", "content": "x"}),
        call("pay", {"amount": 500}),
        call("write_file", {"path": "c", "content": "y"}),
    ),
    call("boom", {"x": 2}),
    "All done.",
]


async def decide(requests):
    by_path = {"b": Approve(), "c": Deny("not c")}
    return {
        r.call_id: by_path[r.arguments["path"]] if r.tool == "write_file" else Edit({"amount": 5})
        for r in requests
    }


async def record(path: Path, **options) -> tuple[Agent, object]:
    _, tools = make_tools()
    agent = Agent(ScriptedModel(SCRIPT), tools, instructions="Be careful.", approver=decide,
                  **options)  # fmt: skip
    result = await agent.clone(hooks=[Recorder(path)]).run("go")
    return agent, result


async def test_a_replay_gives_the_same_transitions_and_output_with_no_side_effects(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "run.jsonl"
    _, recorded = await record(tape)
    counted, _ = make_tools()
    replayed = await replay(tape)
    assert replayed.output == recorded.output == "All done."
    assert [(t.source, t.target, t.event) for t in replayed.transitions] == [
        (t.source, t.target, t.event) for t in recorded.transitions
    ]
    assert replayed.messages[1:] == recorded.messages[1:]
    assert sum(counted.values()) == 0


async def test_replaying_against_the_same_agent_passes_and_runs_no_tool(tmp_path: Path) -> None:
    tape = tmp_path / "run.jsonl"
    await record(tape)
    counted, tools = make_tools()
    agent = Agent(ScriptedModel([]), tools, instructions="Be careful.")
    result = await replay(tape, agent)
    assert result.output == "All done."
    assert sum(counted.values()) == 0


async def test_live_tools_run_the_real_tools_under_a_replayed_model(tmp_path: Path) -> None:
    tape = tmp_path / "run.jsonl"
    await record(tape)
    counted, tools = make_tools()
    agent = Agent(ScriptedModel([]), tools, instructions="Be careful.")
    await replay(tape, agent, live_tools=True)
    assert counted == {"read_file": 1, "write_file": 1, "pay": 1, "boom": 1}


async def test_changed_instructions_diverge_at_step_one_with_a_readable_diff(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "run.jsonl"
    await record(tape)
    _, tools = make_tools()
    with pytest.raises(ReplayDivergence) as caught:
        await replay(tape, Agent(ScriptedModel([]), tools, instructions="Be bold."))
    message = str(caught.value)
    assert message.startswith("replay diverged at step 1: the request differs")
    assert '-      "content": "Be careful.",' in message
    assert '+      "content": "Be bold.",' in message


async def test_a_changed_tool_set_diverges(tmp_path: Path) -> None:
    tape = tmp_path / "run.jsonl"
    await record(tape)
    _, tools = make_tools()
    with pytest.raises(ReplayDivergence, match="step 1: the request differs"):
        await replay(tape, Agent(ScriptedModel([]), tools[:2], instructions="Be careful."))


def test_a_cassette_is_versioned_json_lines_with_every_kind_of_record(tmp_path: Path) -> None:
    import asyncio

    tape = tmp_path / "run.jsonl"
    asyncio.run(record(tape))
    lines = [json.loads(line) for line in tape.read_text().splitlines()]
    assert lines[0] == {"format": "loopstate-cassette", "kind": "header", "model": None,
                        "settings": {}, "version": 1}  # fmt: skip
    kinds = {line["kind"] for line in lines}
    assert kinds == {"header", "run", "model", "decision", "tool", "transition", "outcome"}
    assert all(list(line) == sorted(line) for line in lines)  # stable key order for diffs
    decisions = [(d["tool"], d["decision"]["kind"]) for d in lines if d["kind"] == "decision"]
    assert decisions == [("write_file", "approve"), ("pay", "edit"), ("write_file", "deny")]


async def test_a_run_suspended_and_resumed_elsewhere_records_and_replays_whole(
    tmp_path: Path,
) -> None:
    tape, db = tmp_path / "run.jsonl", tmp_path / "runs.db"
    _, tools = make_tools()
    script = [call("write_file", {"path": "b", "content": "x"}), "Written."]
    first = Agent(ScriptedModel(script), tools, store=SQLiteStore(db), hooks=[Recorder(tape)])
    suspended = await first.run("go")
    later = Agent(ScriptedModel(script, by_step=True), tools, store=SQLiteStore(db),
                  hooks=[Recorder(tape)])  # fmt: skip
    await later.resume(suspended.run_id, {suspended.pending[0].call_id: Approve()})
    replayed = await replay(tape)
    assert (replayed.status, replayed.output) == ("done", "Written.")


async def test_recording_through_litellm_writes_no_secret_and_replays_offline(
    tmp_path: Path,
) -> None:
    connects: list[object] = []
    sys.addaudithook(lambda e, a: connects.append(a) if e == "socket.connect" else None)
    for provider, base in (("openai/test-model", "/v1"), ("anthropic/claude-test", "")):
        tape = tmp_path / f"{provider.split('/')[0]}.jsonl"
        _, tools = make_tools()
        with serve(
            tool_call_reply(("call_1", "read_file", {"path": "x"})), text_reply("Read.")
        ) as server:
            model = LiteLLMModel(provider, api_base=server.url + base, api_key="sk-SECRET-123",
                                 extra_headers={"X-Auth": "hunter2"}, temperature=0)  # fmt: skip
            recorded = await Agent(model, tools, hooks=[Recorder(tape, model=model)]).run("go")
        text = tape.read_text()
        assert "SECRET" not in text
        assert "hunter2" not in text
        settings = json.loads(text.splitlines()[0])["settings"]
        assert settings == {"api_base": server.url + base, "temperature": 0}
        connects.clear()
        replayed = await replay(tape, Agent(model, tools))
        assert replayed.output == recorded.output == "Read."
        assert connects == []
        assert len(server.requests) == 2


def test_recorded_settings_drop_credentials_and_url_passwords() -> None:
    from loopstate.engine.recording.cassette import safe_settings

    settings = {"api_base": "https://bob:pw@host/v1", "api_key": "sk", "extra_headers": {},
                "temperature": 0.2, "aws_secret_access_key": "x", "auth_token": "t"}  # fmt: skip
    assert safe_settings(settings) == {"api_base": "https://host/v1", "temperature": 0.2}


async def test_the_incremental_digest_equals_the_digest_of_the_whole_request(
    tmp_path: Path,
) -> None:
    from loopstate.engine.recording.cassette import Cassette, digest_of

    tape = tmp_path / "run.jsonl"
    await record(tape)
    turns = Cassette.load(tape).model_turns()
    assert len(turns) == 3
    for turn in turns.values():
        assert digest_of(turn["request"]) == turn["digest"]
    first_lines = [json.loads(x) for x in tape.read_text().splitlines() if '"kind": "model"' in x]
    assert [r["first"] for r in first_lines] == [0, 2, 7]  # only new messages are stored
