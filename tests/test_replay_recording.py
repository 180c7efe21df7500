"""Recording: across real processes, credentials never written, one run per cassette."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from model_server import serve, text_reply, tool_call_reply
from support import forking, make_tools

from loopstate import Agent, LiteLLMModel, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.recording.cassette import Cassette, digest_of
from loopstate.engine.recording.recorder import Recorder
from loopstate.replay import replay, replay_sync

CHILD = """
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from support import make_tools
from loopstate import Agent, Approve, ScriptedModel
from loopstate.engine.recording.recorder import Recorder
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore

SCRIPT = [call("read_file", {{"path": "a"}}), call("write_file", {{"path": "b", "content": "x"}}),
          "Written."]

async def main(step: str) -> None:
    counted, tools = make_tools()
    agent = Agent(ScriptedModel(SCRIPT, by_step=True), tools, instructions="Careful.",
                  store=SQLiteStore("runs.db"), hooks=[Recorder("run.jsonl")])
    if step == "start":
        result = await agent.run("go")
        print(result.run_id, result.status, result.pending[0].call_id)
    else:
        run_id, call_id = sys.argv[2:4]
        result = await agent.resume(run_id, {{call_id: Approve()}})
        print(result.status, result.output)
    print(dict(counted))

asyncio.run(main(sys.argv[1]))
"""


def child(folder: Path, *args: str) -> list[str]:
    out = forking.run([sys.executable, "child.py", *args], cwd=folder, capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    return out.stdout.splitlines()


def test_a_run_suspended_in_one_process_and_resumed_in_another_replays_whole(
    tmp_path: Path,
) -> None:
    (tmp_path / "child.py").write_text(CHILD.format(tests=str(Path(__file__).parent)))
    run_id, status, call_id = child(tmp_path, "start")[0].split()
    assert status == "awaiting_approval"
    assert child(tmp_path, "resume", run_id, call_id)[0] == "done Written."

    counted, tools = make_tools()
    agent = Agent(ScriptedModel([]), tools, instructions="Careful.")
    replayed = replay_sync(tmp_path / "run.jsonl", agent)
    assert (replayed.status, replayed.output) == ("done", "Written.")
    assert sum(counted.values()) == 0
    tape = Cassette.load(tmp_path / "run.jsonl")
    assert [r["run_id"] for r in tape.of_kind("run")] == [run_id, run_id]  # start, resume
    assert [d["actor"] for d in tape.of_kind("decision")] == ["resume"]
    assert [t["step"] for t in tape.of_kind("model")] == [1, 2, 3]


@tool
def show_environment() -> str:
    """Print the environment, as a shell tool might."""
    return "MY_SERVICE_API_KEY=" + os.environ["MY_SERVICE_API_KEY"]


async def test_no_credential_is_written_even_when_a_tool_prints_one_and_it_still_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "svc-ENVSECRET-42")
    tape = tmp_path / "run.jsonl"
    with serve(tool_call_reply(("call_1", "show_environment", {})), text_reply("Seen.")) as server:
        model = LiteLLMModel(
            "openai/test-model",
            api_base=f"{server.url}/v1",
            api_key="sk-SETTINGSECRET-1",
            max_tokens=64,
            extra_headers={"Authorization": "Bearer hdr-HEADERSECRET-2"},
        )
        agent = Agent(model, [show_environment])
        await agent.clone(hooks=[Recorder(tape, model=model)]).run("go")
        assert "svc-ENVSECRET-42" in json.dumps(server.requests[-1].body)  # the model saw it
    text = tape.read_text()
    for secret in ("ENVSECRET", "SETTINGSECRET", "HEADERSECRET", "Bearer"):
        assert secret not in text
    assert "MY_SERVICE_API_KEY=[REDACTED]" in text
    header = json.loads(text.splitlines()[0])
    assert header["settings"] == {"api_base": f"{server.url}/v1", "max_tokens": 64}
    replayed = await replay(tape, agent)
    assert replayed.output == "Seen."
    for turn in Cassette.load(tape).model_turns().values():
        assert digest_of(turn["request"]) == turn["digest"]


async def test_a_new_run_starts_its_cassette_afresh_and_a_reused_recorder_records_each_run(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "run.jsonl"
    _, tools = make_tools()
    script = [
        call("read_file", {"path": "a"}),
        "First.",
        call("read_file", {"path": "b"}),
        "Second.",
    ]
    agent = Agent(ScriptedModel(script), tools, hooks=[Recorder(tape)])
    await agent.run("one")
    await agent.run("two")
    tape_ = Cassette.load(tape)
    assert len(tape_.of_kind("run")) == 1
    assert [r["first"] for r in tape_.of_kind("model")] == [0, 1]
    replayed = await replay(tape)
    assert replayed.output == "Second."


def test_credentials_are_found_in_settings_and_the_environment_by_name() -> None:
    from loopstate.engine.recording.cassette import secret_values

    environ = {"GITHUB_TOKEN": "ghp_0123456789", "AWS_SECRET_ACCESS_KEY": "aws-secret-1",
               "GIT_AUTHOR_NAME": "Jane Smithson", "TOKENIZERS_PARALLELISM": "false-ish",
               "SHORT_TOKEN": "abc"}  # fmt: skip
    settings = {"api_key": "sk-0123456789", "extra_headers": {"X-Org": "org-123456789"},
                "api_base": "http://127.0.0.1:8000/v1", "max_tokens": 64}  # fmt: skip
    assert set(secret_values(settings, environ)) == {
        "ghp_0123456789", "aws-secret-1", "sk-0123456789", "org-123456789",
    }  # fmt: skip
