"""A worker process SIGKILLed mid-approval, mid-tool, or after a tool activity started but
before the tool's body did: a new worker finishes the run, and a non-idempotent tool's effect
happens once (run by the new worker when the first never began it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporal_scenarios import (
    CRASH_SETTINGS,
    crash_mid_approval,
    crash_mid_tool,
    kill,
    start_worker,
)
from temporal_support import serving

pytestmark = pytest.mark.slow


async def test_a_worker_killed_mid_tool_is_replaced_and_the_effect_happens_once(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path, settings=CRASH_SETTINGS, worker=False) as s:
        run_id = await crash_mid_tool(s, temporal_address, run_id="kill-mid-tool")
        result = await s.runs.result(run_id)
    assert (tmp_path / "effects.txt").read_text() == "once\n"
    assert result.status == "done"
    assert "interrupted, outcome unknown" in (result.output or "")
    [call] = [c for c in result.transitions if c.target == "executing_tool"]
    assert call.source == "thinking"


async def test_a_worker_killed_mid_approval_is_replaced_and_takes_the_decision(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path, worker=False) as s:
        run_id = await crash_mid_approval(s, temporal_address, run_id="kill-mid-approval")
        result = await s.runs.result(run_id)
    assert result.status == "done"
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    assert result.output == "final: appended 'hello' to notes.txt"


async def test_a_worker_killed_before_the_tool_body_started_has_the_call_run_once(
    temporal_address: str, tmp_path: Path
) -> None:
    (tmp_path / "release").touch()  # the tool returns as soon as it has had its effect
    async with serving(temporal_address, tmp_path, settings=CRASH_SETTINGS, worker=False) as s:
        held = start_worker(temporal_address, s, "hold")
        try:
            run_id = await s.runs.start("slow", "append once", run_id="kill-before-body")
            assert held.stdout is not None
            line = await asyncio.to_thread(held.stdout.readline)
            assert line.strip() == "tool activity started"
        finally:
            kill(held)
        assert not (tmp_path / "effects.txt").exists()  # the body never began
        second = start_worker(temporal_address, s)
        try:
            result = await s.runs.result(run_id)
        finally:
            kill(second)
    assert (tmp_path / "effects.txt").read_text() == "once\n"  # run, and once
    assert result.status == "done"
    assert result.output == "final: appended and released"
