"""What the model is told a tool returned, for what a first tool returns: bytes from a
subprocess are its text (a byte that is not UTF-8 shown as U+FFFD), not Python's repr."""

from __future__ import annotations

import subprocess
import sys

from loopstate import Agent, MemoryStore, tool
from loopstate.engine.messages import ToolMessage
from loopstate.testing import ScriptedModel, call

PRINTS = "import sys; sys.stdout.buffer.write('Crème brûlée\\nline 2 \\xff\\n'.encode('latin-1'))"


@tool
def run_script(code: str) -> bytes:
    """Run a Python snippet; its output."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout


@tool
def status() -> bytearray:
    """The status, as a buffer."""
    return bytearray("ready ✓\n".encode())


def test_bytes_a_tool_returns_reach_the_model_as_their_text() -> None:
    model = ScriptedModel(
        [call("run_script", {"code": PRINTS}), call("status", {}), "Done."], by_step=True
    )
    result = Agent(model, [run_script, status], store=MemoryStore()).run_sync("Run it")
    assert result.status == "done", result
    told = [m.content for m in result.messages if isinstance(m, ToolMessage)]
    assert told == ["Cr\ufffdme br\ufffdl\ufffde\nline 2 \ufffd\n", "ready ✓\n"]
