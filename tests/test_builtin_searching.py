"""grep ends, and never stalls the event loop, whatever the pattern."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from builtin_support import invoke

from loopstate import Agent, ScriptedModel
from loopstate.engine.models.scripted import call
from loopstate.tools.builtin import grep, searching

CATASTROPHIC = "(a+)+$"  # backtracks exponentially on a run of a's that does not end the line


async def ticks_while(work: asyncio.Task[object]) -> int:
    """How many 10 ms ticks another task of the loop got while `work` ran."""
    ticks = 0
    while not work.done():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


async def test_a_catastrophic_pattern_ends_with_a_clear_error_while_the_loop_keeps_ticking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The matcher's limit counts its CPU time: kept short, so that a machine busy enough to
    # stretch it tenfold still ends it well within the tool's wall-clock timeout (15 s).
    monkeypatch.setattr(searching, "SEARCH_S", 0.2)
    (tmp_path / "a.txt").write_text("ok\n" + "a" * 1000 + "!\n")
    model = ScriptedModel([call("grep", {"pattern": CATASTROPHIC}), "ok"])
    started = time.monotonic()
    run = asyncio.create_task(Agent(model, [grep], workspace=tmp_path).run("go"))
    ticks = await ticks_while(run)
    elapsed = time.monotonic() - started
    assert (await run).status == "done"
    seen = model.requests[1].messages[-1].content
    assert seen.startswith("Error: grep raised ToolError: the pattern took over 0.2 s on a.txt:2")
    assert "exponential time" in seen
    assert grep.timeout is not None
    assert elapsed < grep.timeout
    assert ticks >= elapsed / 0.01 / 10  # the loop ran all along (with `re` it froze: ~0)


async def test_a_short_line_that_stalls_re_is_searched_at_once(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a" * 30 + "!\n" + "a" * 30 + "\n")
    search = asyncio.create_task(invoke(grep, tmp_path, pattern=CATASTROPHIC))
    ticks = await ticks_while(search)
    assert await search == "a.txt:2: " + "a" * 30
    assert ticks < 100


async def test_a_search_out_of_time_returns_what_it_found_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(searching, "SEARCH_S", 0.0)
    (tmp_path / "a.txt").write_text("needle\n")
    out = await invoke(grep, tmp_path, pattern="needle")
    assert out == "no matches\n[search stopped at its 0 s limit: narrow `include`]"


async def test_grep_reads_re_syntax(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def main():\n    x = 1\nclass Main:\n")
    out = await invoke(grep, tmp_path, pattern=r"^(?P<kw>def|class)\s+\w+(?=[(:])")
    assert out == "a.py:1: def main():\na.py:3: class Main:"
