"""A worker process SIGKILLed mid-approval or mid-tool: a new worker finishes the run, and a
non-idempotent tool's effect happens once."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporal_scenarios import CRASH_SETTINGS, crash_mid_approval, crash_mid_tool
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
