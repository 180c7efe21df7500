"""The pytest plugin, in a real pytest subprocess: record through litellm, replay offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from model_server import serve, text_reply, tool_call_reply
from support import forking

USER_TEST = '''
import os
from loopstate import Agent, LiteLLMModel, tool

@tool
def lookup(term: str) -> str:
    """Look a term up."""
    with open("lookups.log", "a") as f:
        f.write(term + "\\n")
    return f"{term}: a state machine library"

def make_agent():
    model = LiteLLMModel("openai/test-model", api_base=os.environ.get("MODEL_URL", "http://127.0.0.1:9"),
                         api_key="sk-test")
    return Agent(model, [lookup], instructions="Answer briefly.")

def test_lookup(loopstate_cassette):  # a plain test: no pytest-asyncio mode needed
    result = loopstate_cassette.run_sync(make_agent(), "PROMPT")
    assert result.output == "It is a library."
'''


def pytest_run(folder: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return forking.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
         *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_record_then_replay_offline_then_fail_with_a_diff_on_a_changed_prompt(
    tmp_path: Path,
) -> None:
    test_file = tmp_path / "test_user.py"
    test_file.write_text(USER_TEST.replace("PROMPT", "What is loopstate?"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    with serve(
        tool_call_reply(("call_1", "lookup", {"term": "loopstate"})), text_reply("It is a library.")
    ) as server:
        recorded = pytest_run(tmp_path, "--loopstate-record",
                              env={**env, "MODEL_URL": f"{server.url}/v1"})  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert (tmp_path / "cassettes" / "test_lookup.jsonl").exists()
    assert (tmp_path / "lookups.log").read_text() == "loopstate\n"
    assert not (tmp_path / ".loopstate").exists()  # recording keeps no runs in the project

    replayed = pytest_run(tmp_path, env=env)  # no server: replay needs none
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert (tmp_path / "lookups.log").read_text() == "loopstate\n"  # no side effect

    test_file.write_text(USER_TEST.replace("PROMPT", "What is loopstate, really?"))
    diverged = pytest_run(tmp_path, env=env)
    assert diverged.returncode == 1
    assert "replay diverged at step 1" in diverged.stdout
    assert '+      "content": "What is loopstate, really?"' in diverged.stdout
    assert "pytest --loopstate-record test_user.py::test_lookup" in diverged.stdout
    failure = diverged.stdout.split("___ test_lookup ___")[1].split("short test summary")[0]
    assert "machines/agent" not in failure  # the diff, not the engine's frames
    assert len(failure.splitlines()) < 40


def test_a_missing_cassette_says_how_to_record_it(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(USER_TEST.replace("PROMPT", "hi"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    out = pytest_run(tmp_path, env=env)
    assert out.returncode == 1
    assert "record it with --loopstate-record" in out.stdout


NEW_MODEL_TEST = """

@pytest.mark.loopstate_cassette("test_lookup")
def test_another_model_from_step_one(loopstate_cassette):
    agent = make_agent()
    report = loopstate_cassette.from_step_sync(agent.clone(model=LiteLLMModel(
        "openai/new-model", api_base=os.environ["NEW_URL"], api_key="sk-test")), 1)
    assert report.first_divergent_step == 2
    assert report.new_answer == {"text": "A library, briefly.", "calls": []}
"""


def test_a_test_keeps_a_recorded_prefix_and_asserts_on_another_model(tmp_path: Path) -> None:
    test_file = tmp_path / "test_user.py"
    test_file.write_text("import pytest\n" + USER_TEST.replace("PROMPT", "What is loopstate?"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    with serve(
        tool_call_reply(("call_1", "lookup", {"term": "loopstate"})), text_reply("It is a library.")
    ) as server:
        recorded = pytest_run(tmp_path, "--loopstate-record",
                              env={**env, "MODEL_URL": f"{server.url}/v1"})  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    test_file.write_text(test_file.read_text() + NEW_MODEL_TEST)
    with serve(text_reply("A library, briefly.")) as new:
        ran = pytest_run(tmp_path, "-k", "another_model", env={**env, "NEW_URL": f"{new.url}/v1"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(new.requests) == 1  # step 2 only: step 1 and its lookup came from the cassette
    assert (tmp_path / "lookups.log").read_text() == "loopstate\n"
