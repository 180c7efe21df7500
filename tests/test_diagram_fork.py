"""`loopstate diagram --run FORK`: a fork's inherited part (its copied past) and its own part
are drawn apart — dashed and labelled "before the fork", or solid and counted."""

from __future__ import annotations

import sys
from pathlib import Path

from support import forking, make_tools
from test_diagrams import a_real_run, check_mermaid

from loopstate import Agent, ScriptedModel
from loopstate.engine.diagram import render
from loopstate.engine.stores.sqlite import SQLiteStore


def draw(db: str, run_id: str, *fmt: str) -> str:
    return forking.run(
        [sys.executable, "-m", "loopstate", "diagram", "--run", run_id, "--db", db, *fmt],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


async def test_a_fork_is_drawn_with_its_inherited_part_apart_from_its_own(tmp_path: Path) -> None:
    _, db = await a_real_run(tmp_path)
    _, tools = make_tools()
    agent = Agent(ScriptedModel(["forked"]), tools, store=SQLiteStore(db), ids=lambda: "f1")
    await agent.resume(await agent.fork("r1", at=4))

    dot = draw(db, "f1", "--format", "dot")
    start = next(line for line in dot.splitlines() if '"idle" -> "thinking"' in line)
    assert "start (×1 before the fork)" in start
    assert "style=dashed" in start
    answer = next(line for line in dot.splitlines() if '"thinking" -> "done"' in line)
    assert "×1" in answer
    assert "before the fork" not in answer
    assert "penwidth=2" in answer
    assert '"awaiting_approval" [label="Awaiting approval", style="rounded,filled,dashed"' in dot
    assert render(dot, "svg").decode().rstrip().endswith("</svg>")

    mermaid = draw(db, "f1")
    assert "class idle,awaiting_approval,executing_tool inherited" in mermaid
    assert "class done current" in mermaid
    assert check_mermaid([mermaid])[0]["ok"]
