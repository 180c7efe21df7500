"""The pytest plugin's cassette names, sync use and light loading, in a real pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USER_TEST = '''
import sys
import pytest
from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.models.scripted import call

def test_the_plugin_has_not_imported_the_engine():
    assert "loopstate.engine.recording.recorder" not in sys.modules

@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: a library"

def make_agent(answer):
    return Agent(ScriptedModel([call("lookup", {"term": "x"}), answer]), [lookup])

@pytest.mark.loopstate_cassette("shared")
@pytest.mark.parametrize("case", ["a", "b"])
def test_both_cases_use_the_named_cassette(loopstate_cassette, case):
    assert loopstate_cassette.path.name == "shared.jsonl"
    result = loopstate_cassette.run_sync(make_agent("ANSWER"), "What is x?")
    assert result.output == "It is a library."
'''


def pytest_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "-o",
         "asyncio_default_fixture_loop_scope=function",
         *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_marker_names_the_cassette_and_sync_tests_record_and_replay_it(
    tmp_path: Path,
) -> None:
    test_file = tmp_path / "test_user.py"
    test_file.write_text(USER_TEST.replace("ANSWER", "It is a library."))
    recorded = pytest_run(tmp_path, "--loopstate-record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert [p.name for p in (tmp_path / "cassettes").iterdir()] == ["shared.jsonl"]

    # the script's answer changes, the cassette does not: replay serves the recorded one
    test_file.write_text(USER_TEST.replace("ANSWER", "Something else."))
    replayed = pytest_run(tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "3 passed" in replayed.stdout


def test_the_marker_is_registered(tmp_path: Path) -> None:
    out = pytest_run(tmp_path, "--markers")
    assert "@pytest.mark.loopstate_cassette(name)" in out.stdout
