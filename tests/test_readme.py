"""The README's first commands and its example are true."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

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


RUN_BLOCKS = """
import ast, asyncio, json, sys
namespace = {"__name__": "__main__"}
for block in json.load(sys.stdin):
    code = compile(block, "<README>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
"""


def run_blocks(
    blocks: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_BLOCKS], input=json.dumps(blocks), cwd=cwd, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_example_runs_against_a_model_server_over_real_http(tmp_path: Path) -> None:
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
        env = {**os.environ, "OPENAI_API_BASE": f"{server.url}/v1", "OPENAI_API_KEY": "sk-test"}
        out = run_blocks([example], tmp_path, env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "done: Fixed the typo."
    assert lines[1:4] == ["1 idle → thinking start", "2 thinking → executing_tool replied",
                          "3 executing_tool → thinking tools_done"]  # fmt: skip
    assert (tmp_path / "docs/index.md").read_text() == "Hello\n"
    assert not (tmp_path / "README.md").exists()  # denied: docs/ only
    third = server.requests[2].body["messages"]
    assert "docs/ only" in third[-1]["content"]


def test_every_python_block_of_the_readme_runs_in_order(tmp_path: Path) -> None:
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
        env = {**os.environ, "OPENAI_API_BASE": f"{server.url}/v1", "OPENAI_API_KEY": "sk-test"}
        out = run_blocks(python_blocks(), tmp_path, env)
    assert out.returncode == 0, out.stderr
    assert len(python_blocks()) >= 5
    assert "c2 write_file {'path': 'README.md', 'content': '# New\\n'}" in out.stdout
    assert (tmp_path / "README.md").read_text() == "# New\n"  # approved on resume
    assert len(server.requests) == 6  # the replay made none
    assert (tmp_path / "cassettes/typo.jsonl").exists()
    assert "done Your invoice is under Settings → Billing." in out.stdout


def test_the_example_without_a_key_prints_why_the_run_failed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    out = run_blocks([python_blocks()[0]], tmp_path, env)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("failed: ModelError: model openai/gpt-4o-mini failed:"), first
    assert "api_key" in first
    assert "None" not in first
