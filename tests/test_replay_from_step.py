"""`replay(cassette, agent, from_step=N)`: the recording's first N turns and tool results are
served, then the agent's own model goes on live over real HTTP; the report names where the
new run departs from the recording."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from model_server import serve, text_reply, tool_call_reply
from support import forking
from test_fork import counted_tools

from loopstate import Agent, DefinitionError, LiteLLMModel, MemoryStore
from loopstate.engine.recording.recorder import Recorder
from loopstate.replay import replay

FIVE = [tool_call_reply((f"r{i}", "read_file", {"path": f"f{i}"})) for i in range(1, 5)]


def python_settings() -> dict[str, str]:
    """The interpreter's PYTHON* settings the tests run with (PYTHONDONTWRITEBYTECODE, ...):
    a child with others would be a fresh interpreter, not one forked (`support.forking`)."""
    return {name: value for name, value in os.environ.items() if name.startswith("PYTHON")}


def model(base: str, name: str) -> LiteLLMModel:
    return LiteLLMModel(f"openai/{name}", api_base=base, api_key="sk-test")


async def recorded(tmp_path: Path) -> Path:
    """A five-step recording: four reads, then an answer."""
    tape = tmp_path / "run.jsonl"
    with serve(*FIVE, text_reply("Read all four.")) as server:
        _, tools = counted_tools()
        agent = Agent(model(server.openai_base, "old"), tools, store=MemoryStore())
        result = await agent.clone(hooks=[Recorder(tape)]).run("Read the files.")
    assert result.steps == 5
    return tape


async def test_from_step_two_serves_two_turns_then_goes_live_and_names_step_three(
    tmp_path: Path,
) -> None:
    tape = await recorded(tmp_path)
    runs, tools = counted_tools()
    with serve(text_reply("Two files are enough.")) as server:
        agent = Agent(model(server.openai_base, "new"), tools, store=MemoryStore())
        report = await replay(tape, agent, from_step=2)

    assert len(server.requests) == 1  # step 3 only: none for steps 1-2
    assert runs["read_file"] == 0  # the served turns' results came from the recording
    assert [m.get("content") for m in server.bodies[0]["messages"]][-1] == "contents of f2"
    assert report.first_divergent_step == 3
    assert report.recorded_answer == {"text": None, "calls": ['read_file({"path": "f3"})']}
    assert report.new_answer == {"text": "Two files are enough.", "calls": []}
    assert (report.result.output, report.result.steps) == ("Two files are enough.", 3)
    assert len(report.recorded_transitions) == 10
    assert len(report.new_transitions) == 6
    assert len(report.recorded_tool_calls) == 4
    assert len(report.new_tool_calls) == 2
    assert report.recorded_usage.prompt_tokens == 55
    assert report.new_usage.prompt_tokens == 33
    lines = report.lines()
    assert lines[1].split()[-1] == "3"
    assert "Two files are enough." in lines[2]


async def test_a_live_run_that_agrees_with_the_recording_does_not_depart(tmp_path: Path) -> None:
    tape = await recorded(tmp_path)
    runs, tools = counted_tools()
    with serve(*FIVE[3:], text_reply("Read all four.")) as server:
        agent = Agent(model(server.openai_base, "new"), tools, store=MemoryStore())
        report = await replay(tape, agent, from_step=3)
    assert report.first_divergent_step is None
    assert runs["read_file"] == 1
    assert report.recorded_transitions == report.new_transitions


async def test_from_step_outside_the_recording_is_refused(tmp_path: Path) -> None:
    tape = await recorded(tmp_path)
    _, tools = counted_tools()
    agent = Agent(model("http://127.0.0.1:9/v1", "new"), tools, store=MemoryStore())
    with pytest.raises(DefinitionError, match="between 1 and 5"):
        await replay(tape, agent, from_step=6)


AGENT = """
from loopstate import Agent, LiteLLMModel, MemoryStore, tool
import os

@tool
def read_file(path: str) -> str:
    '''Read a file.'''
    return f"contents of {path}"

@tool(needs_approval=True)
def write_file(path: str, content: str) -> str:
    '''Write a file.'''
    return f"wrote {path}"

agent = Agent(LiteLLMModel("openai/new", api_base=os.environ["BASE"], api_key="k"),
              [read_file, write_file], store=MemoryStore())
"""


async def test_the_cli_replays_from_a_step_and_prints_the_departure(tmp_path: Path) -> None:
    tape = await recorded(tmp_path)
    (tmp_path / "newagent.py").write_text(AGENT)
    with serve(text_reply("Two files are enough.")) as server:
        out = forking.run(
            [sys.executable, "-m", "loopstate", "replay", str(tape), "--from-step", "2",
             "--agent", "newagent:agent", "--json"],
            capture_output=True, text=True, cwd=tmp_path, timeout=300,
            env={**python_settings(), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path),
                 "BASE": server.openai_base},
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["first_divergent_step"] == 3
    assert len(server.requests) == 1
