"""Long runs on Temporal: continue-as-new at a step boundary, transcripts past the payload limit."""

from __future__ import annotations

from pathlib import Path

from temporal_support import serving

from loopstate.temporal import RunSettings


async def test_a_long_run_continues_as_new_carrying_its_state(
    temporal_address: str, tmp_path: Path
) -> None:
    settings = RunSettings(continue_after_steps=2)
    async with serving(temporal_address, tmp_path, settings=settings) as s:
        run_id = await s.runs.start("looper", "look five keys up")
        result = await s.runs.result(run_id)
        executions = [e async for e in s.client.list_workflows(f"WorkflowId = '{run_id}'")]
    assert result.status == "done"
    assert result.steps == 6
    assert result.output == "final: value of k5"
    assert len(executions) == 3  # steps 1-2, 3-4, 5-6
    assert [t.seq for t in result.transitions] == list(range(1, len(result.transitions) + 1))
    assert [t.target for t in result.transitions].count("executing_tool") == 5
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert [m.content for m in tool_messages] == [f"value of k{i}" for i in range(1, 6)]
    assert result.events[0].kind == "run_resumed"  # the last workflow run's own events


async def test_a_transcript_past_the_payload_limit_is_passed_by_reference(
    temporal_address: str, tmp_path: Path
) -> None:
    blobs = tmp_path / "blobs"
    prompt = "x" * 3_000_000  # past the server's 2 MB payload limit
    async with serving(temporal_address, tmp_path, blobs=blobs) as s:
        assert s.runs.settings.by_reference
        run_id = await s.runs.start("looper", prompt)
        result = await s.runs.result(run_id)
    assert result.status == "done"
    assert result.messages[0].content == prompt
    assert any(p.stat().st_size > 3_000_000 for p in blobs.iterdir())


async def test_without_a_blob_store_an_oversized_transcript_fails_the_run_clearly(
    temporal_address: str, tmp_path: Path
) -> None:
    settings = RunSettings(payload_limit=100_000)
    async with serving(temporal_address, tmp_path, settings=settings) as s:
        run_id = await s.runs.start("looper", "y" * 150_000)
        result = await s.runs.result(run_id)
    assert result.status == "failed"
    assert result.error is not None
    assert "past the payload limit (100000)" in result.error
    assert result.steps == 0  # no model call was made
