"""The README's first commands and its example are true."""

from __future__ import annotations

import ast
import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest
import structlog
from model_server import serve, text_reply, tool_call_reply

README = (Path(__file__).parent.parent / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_readme_starts_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["bash scripts/demo --yes", "bash scripts/test"]
    assert README.index("```bash") < README.index("## Example")
    assert (
        ".venv/bin/python -m pytest" in (Path(__file__).parent.parent / "scripts/test").read_text()
    )


def run_blocks(blocks: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run `blocks` in order in one namespace, as a script named `__main__` with top-level
    await; returns what they printed. In this interpreter: the environment is the test's."""
    structlog.reset_defaults()  # unconfigured, as in a fresh interpreter (a test may leave it)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for block in blocks:
        code = compile(block, "<README>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    return capsys.readouterr().out


def model_server_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", f"{url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def test_the_example_runs_against_a_model_server_over_real_http(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    example = python_blocks()[0]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/index.md").write_text("Helo\n")
    with serve(
        tool_call_reply(("c1", "read_file", {"path": "docs/index.md"})),
        tool_call_reply(
            ("c2", "write_file", {"path": "docs/index.md", "content": "Hello\n"}),
            ("c3", "write_file", {"path": "README.md", "content": "nope"}),
        ),
        text_reply("Fixed the typo."),
    ) as server:
        model_server_env(monkeypatch, server.url)
        lines = run_blocks([example], capsys).splitlines()
    assert lines[0] == "done: Fixed the typo."
    assert lines[1:4] == ["1 idle → thinking start", "2 thinking → executing_tool replied",
                          "3 executing_tool → thinking tools_done"]  # fmt: skip
    assert (tmp_path / "docs/index.md").read_text() == "Hello\n"
    assert not (tmp_path / "README.md").exists()  # denied: docs/ only
    third = server.requests[2].body["messages"]
    assert "docs/ only" in third[-1]["content"]


def test_every_python_block_of_the_readme_runs_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/index.md").write_text("Helo\n")
    with serve(
        tool_call_reply(("c1", "write_file", {"path": "docs/index.md", "content": "Hello\n"})),
        text_reply("Fixed."),
        tool_call_reply(("c2", "write_file", {"path": "README.md", "content": "# New\n"})),
        text_reply("Rewritten."),
        tool_call_reply(("c3", "write_file", {"path": "docs/index.md", "content": "Hi\n"})),
        text_reply("Fixed the typo."),
    ) as server:
        model_server_env(monkeypatch, server.url)
        out = run_blocks(python_blocks(), capsys)
    assert len(python_blocks()) >= 5
    assert "c2 write_file {'path': 'README.md', 'content': '# New\\n'}" in out
    assert (tmp_path / "README.md").read_text() == "# New\n"  # approved on resume
    assert len(server.requests) == 6  # the replay made none
    assert (tmp_path / "cassettes/typo.jsonl").exists()
    assert "done Your invoice is under Settings → Billing." in out
    assert "phase: triage\n['answer', 'done'] Refunds take 5 days." in out  # a typed flow, streamed


def test_the_example_without_a_key_prints_why_the_run_failed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("OPENAI_")]:
        monkeypatch.delenv(name)
    first = run_blocks([python_blocks()[0]], capsys).splitlines()[0]
    assert first.startswith("failed: ModelError: model openai/gpt-4o-mini failed:"), first
    assert "api_key" in first
    assert "None" not in first
