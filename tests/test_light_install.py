"""Tool calls work through litellm without its `mcp` extra (mcp, starlette, uvicorn, ...):
LiteLLMModel skips litellm's MCP gateway. Checked over real HTTP, with those packages made
unimportable in the child process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from model_server import serve, text_reply, tool_call_reply

CHILD = '''
import importlib.abc, sys

class Absent(importlib.abc.MetaPathFinder):
    """As if litellm's `mcp` extra were not installed."""
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"mcp", "mcp_types", "starlette", "uvicorn", "sse_starlette"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Absent())
from loopstate import Agent, LiteLLMModel, MemoryStore, tool

@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

model = LiteLLMModel("openai/test-model", api_base=sys.argv[1], api_key="sk-test")
print(Agent(model, [add], store=MemoryStore()).run_sync("1 + 2?"))
print(sorted({m.split(".")[0] for m in sys.modules} & {"mcp", "starlette", "uvicorn"}))
'''


def test_a_tool_call_round_trip_needs_no_mcp_package(tmp_path: Path) -> None:
    with serve(tool_call_reply(("c1", "add", {"a": 1, "b": 2})), text_reply("3")) as server:
        out = subprocess.run([sys.executable, "-c", CHILD, f"{server.url}/v1"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.stdout.splitlines() == ["done: 3", "[]"], out.stderr
    (tools,) = [r.body["tools"] for r in server.requests[:1]]
    assert tools[0]["function"]["name"] == "add"
    assert all("_skip_mcp_handler" not in r.body for r in server.requests)  # never sent
