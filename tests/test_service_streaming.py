"""Streaming is the caller's choice in the service: `loopstate serve --stream` against a
provider that refuses streamed requests still finishes its runs (the step asked again as a
plain call, logged once); `--no-stream` never asks for a stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from model_server import ModelServer, serve, text_reply, tool_call_reply
from service_support import Server, start, stop, wait_for

pytestmark = pytest.mark.slow


def served_run(tmp_path: Path, model: ModelServer, option: str) -> tuple[Server, str]:
    """Start `loopstate serve OPTION` on the model server, a run that reaches the inbox, its
    approval, and its end; the server and its log."""
    server = start(tmp_path / "runs.db", tmp_path / "fx", tmp_path / "serve.log",
                   agent="served_http_agent:agent", options=(option,),
                   MODEL_BASE=model.openai_base)  # fmt: skip
    try:
        with server.client() as client:
            client.timeout = httpx.Timeout(60)  # the first call imports litellm in the server
            run_id = client.post("/api/agents/agent/runs", json={"prompt": "ship"}).json()["run_id"]
            items: list[dict[str, Any]] = wait_for(
                lambda: client.get("/api/approvals", params={"run_id": run_id}).json()["items"],
                within=60,
            )
            (item,) = items
            assert item["tool"] == "deploy"
            path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
            body = {"decision": "approve", "digest": item["digest"]}
            assert client.post(path, json=body, headers={"Idempotency-Key": "k1"}).is_success

            def done() -> dict[str, Any] | None:
                """the run is done"""
                run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
                return run if run["status"] == "done" else None

            assert wait_for(done)["output"] == "shipped"
    finally:
        stop(server)
    return server, server.log.read_text()


def script() -> tuple[Any, ...]:
    return tool_call_reply(("c1", "deploy", {"env": "prod"})), text_reply("shipped")


def test_serve_stream_falls_back_to_plain_calls_when_the_provider_refuses(
    tmp_path: Path,
) -> None:
    with serve(*script()) as model:
        model.refuse_streams = True
        _, log = served_run(tmp_path, model, "--stream")
    assert model.refused == 2  # each step asked for a stream first
    assert [bool(b.get("stream")) for b in model.bodies] == [False, False]
    assert log.count("stream_refused") == 1  # logged once for the model


def test_serve_no_stream_never_asks_for_a_stream(tmp_path: Path) -> None:
    with serve(*script()) as model:
        served_run(tmp_path, model, "--no-stream")
    assert model.refused == 0
    assert len(model.bodies) == 2
    assert not any(b.get("stream") for b in model.bodies)
