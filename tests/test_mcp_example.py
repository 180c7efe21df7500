"""`examples/mcp_files.py` runs offline against the MCP server it ships."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import forking

EXAMPLE = Path(__file__).parent.parent / "examples" / "mcp_files.py"

pytestmark = pytest.mark.slow  # each test starts real MCP server processes


def test_the_mcp_example_runs_its_server_and_waits_where_it_should() -> None:
    out = forking.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "awaiting_approval: files_write_file {'name': 'notes.md', 'content': '# Notes\\n'}",
        "  why: files_write_file needs approval, its server says destructive (MCP server "
        "'files'; annotations: readOnlyHint=False, destructiveHint=True)",
        "awaiting_approval: the server asks 'Delete draft.md?'",
        "done: Wrote notes.md and deleted draft.md.",
        "files: notes.md",
    ]
