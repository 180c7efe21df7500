"""A run that rests `failed` in a state `resume` continues (the model call failed in a way that
may pass) says so where a person looks, `loopstate resume` and `runs show`, with the command
that continues it; a run that failed for good says nothing of the kind. The model is a real
HTTP server on 127.0.0.1 answering 500, then a reply."""

from __future__ import annotations

import contextlib
import runpy
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from model_server import ModelServer, error_reply, serve, text_reply
from support import cli

AGENTS = """
import os
from loopstate import Agent, LiteLLMModel

agent = Agent(LiteLLMModel("openai/test-model", api_base=os.environ["MODEL_BASE"],
                           api_key=os.environ.get("MODEL_KEY", "k")))
"""


def loopstate(
    *args: str, cwd: Path, server: ModelServer, **env: str | None
) -> subprocess.CompletedProcess[str]:
    return cli.loopstate(
        *args, cwd=cwd, env={"LOOPSTATE_DB": None, "MODEL_BASE": server.url, **env}
    )


def failed_run(root: Path, server: ModelServer, key: str = "k") -> tuple[str, str]:
    """A run of `agents:agent` whose first model call failed (the server refused it, or
    `key` is empty: no API key): its id and state."""
    (root / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (root / "agents.py").write_text(AGENTS.replace('"k"', repr(key) if key else "None"))
    with contextlib.chdir(root), _model_base(server):
        result = runpy.run_path(str(root / "agents.py"))["agent"].run_sync("Hi")
    assert result.status == "failed"
    return result.run_id, result.transitions[-1].target


@contextlib.contextmanager
def _model_base(server: ModelServer) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MODEL_BASE", server.url)
        patch.delenv("OPENAI_API_KEY", raising=False)
        yield


def test_a_model_call_that_may_pass_says_how_to_call_it_again(tmp_path: Path) -> None:
    with serve(error_reply(500), error_reply(500), text_reply("Hello.")) as server:
        run, state = failed_run(tmp_path, server)
        assert state == "model_failed"
        again = f"call it again with: loopstate resume {run} --agent"
        shown = loopstate("runs", "show", run, cwd=tmp_path, server=server)
        why = "the model call failed in a way that may pass;"
        assert f"{why} {again} MODULE:ATTR" in shown.stdout.splitlines()

        still = loopstate("resume", run, "--agent", "agents:agent", cwd=tmp_path, server=server)
        assert still.returncode == 1
        assert still.stdout.splitlines()[-1] == f"{why} {again} agents:agent"

        typed = still.stdout.splitlines()[-1].partition("with: loopstate ")[2].split()
        done = loopstate(*typed, cwd=tmp_path, server=server)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "answer: Hello."
        assert "again" not in done.stdout


@pytest.mark.parametrize("refusal", ["no API key", "a key the provider refused"])
def test_a_model_call_refused_for_the_set_up_rests_the_run_until_it_is_fixed(
    tmp_path: Path, refusal: str
) -> None:
    first = () if refusal == "no API key" else (error_reply(401),)
    with serve(*first, text_reply("Hello.")) as server:
        run, state = failed_run(tmp_path, server, key="" if refusal == "no API key" else "k")
        assert state == "model_failed"  # not failed for good: a run that waited days lives on
        fix = "the model call was refused for the set-up (API key, model name); fix it, then "
        again = f"{fix}call it again with: loopstate resume {run} --agent MODULE:ATTR"
        shown = loopstate("runs", "show", run, cwd=tmp_path, server=server)
        assert again in shown.stdout.splitlines()

        (tmp_path / "agents.py").write_text(AGENTS)  # the key given (or put right)
        done = loopstate("resume", run, "--agent", "agents:agent", cwd=tmp_path, server=server)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "answer: Hello."
        assert len(server.requests) == len(first) + 1


def test_a_run_that_failed_for_good_is_not_offered_a_resume(tmp_path: Path) -> None:
    with serve(error_reply(400)) as server:  # the request itself refused: it would be again
        run, state = failed_run(tmp_path, server)
        assert state == "failed"
        shown = loopstate("runs", "show", run, cwd=tmp_path, server=server)
        assert shown.returncode == 0
        assert "error: ModelError" in shown.stdout
        assert "loopstate resume" not in shown.stdout


BUDGETED = """
from loopstate import Agent, Budget, ScriptedModel, tool
from loopstate.engine.models.scripted import call

@tool
def look(city: str) -> str:
    \"\"\"Look a city up.\"\"\"
    return "sunny"

agent = Agent(ScriptedModel([call("look", {"city": "Oslo"}), "Sunny."], by_step=True), [look],
              budget=Budget(model_calls=1))
"""


def test_a_run_over_its_budget_says_how_to_raise_it_and_the_command_does(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (tmp_path / "budgeted.py").write_text(BUDGETED)
    with contextlib.chdir(tmp_path):
        result = runpy.run_path(str(tmp_path / "budgeted.py"))["agent"].run_sync("Weather?")
    assert result.transitions[-1].target == "budget_exceeded"
    shown = cli.loopstate("runs", "show", result.run_id, cwd=tmp_path, env={"LOOPSTATE_DB": None})
    hint = (
        f"the run is over its budget; raise the limit with: loopstate resume {result.run_id} "
        "--agent MODULE:ATTR --budget LIMIT=VALUE"
    )
    assert hint in shown.stdout.splitlines()
    typed = hint.partition("with: loopstate ")[2].replace("MODULE:ATTR", "budgeted:agent")
    typed = typed.replace("LIMIT=VALUE", "model_calls=2")
    done = cli.loopstate(*typed.split(), cwd=tmp_path, env={"LOOPSTATE_DB": None})
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "answer: Sunny."), done.stderr


CHAT = """
from loopstate import Agent, ScriptedModel

agent = Agent(ScriptedModel(["Paris.", "Rome."], by_step=True))
"""


def test_a_run_that_answered_resumed_without_a_message_names_the_option(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (tmp_path / "chat.py").write_text(CHAT)
    with contextlib.chdir(tmp_path):
        first = runpy.run_path(str(tmp_path / "chat.py"))["agent"].run_sync("Capital of France?")
    assert first.status == "done"
    env: dict[str, str | None] = {"LOOPSTATE_DB": None}
    refused = cli.loopstate("resume", first.run_id[:8], "--agent", "chat:agent", cwd=tmp_path,
                            env=env)  # fmt: skip
    again = f"loopstate resume {first.run_id} --agent chat:agent --message TEXT"
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.splitlines() == [
        f"loopstate resume: run {first.run_id} has answered; continue the conversation with: "
        f"{again}"
    ]
    typed = again.split()[1:-1]
    done = cli.loopstate(*typed, "And of Italy?", cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "answer: Rome."), done.stderr
