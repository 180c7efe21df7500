"""ms per MCP tool call through loopstate (`MCPServer`, its tool's `invoke`) beside the SDK's
own `session.call_tool` on the same session (the floor), over stdio to the test server
(`tests/mcp_server.py`), and seconds to start the server and list its tools.

    .venv/bin/python bench/mcp_call.py [CALLS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from mcp_support import stdio_files  # the tests' server as a toolset

from loopstate.engine.tool import ToolContext


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "notes.txt").write_text("alpha\n")
        files = stdio_files(root)
        started = time.perf_counter()
        async with files.session():
            tools = {t.name: t for t in await files.list_tools()}
            listed = time.perf_counter() - started
            tool = tools["files_read_file"]
            ctx = ToolContext(run_id="bench", call_id="c", tool=tool.name, deps=None)
            args = tool.validate({"path": "notes.txt"})
            session = await files._session()  # the same session, for the SDK's own call
            ratios, ours, raw = [], [], []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(calls):
                    await session.call_tool("read_file", {"path": "notes.txt"})
                t1 = time.perf_counter()
                for _ in range(calls):
                    await tool.invoke(args, ctx)
                t2 = time.perf_counter()
                raw.append((t1 - t0) / calls * 1000)
                ours.append((t2 - t1) / calls * 1000)
                ratios.append(ours[-1] / raw[-1])
    print(f"server start + list: {listed:.2f} s")
    print(f"SDK call_tool (floor): {statistics.median(raw):.2f} ms/call")
    ratio = statistics.median(ratios)
    print(f"loopstate MCP tool:    {statistics.median(ours):.2f} ms/call "
          f"({ratio:.2f}x the floor, median of 5 samples of {calls})")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
