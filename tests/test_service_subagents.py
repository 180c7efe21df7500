"""A sub-agent's approval over HTTP: the call waits in the sub-agent's run, the inbox lists it
there, and a decision on it continues the whole tree in the background (the tool runs once)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_support import start, stop, wait_for


@pytest.mark.slow
def test_a_sub_agents_call_decided_in_the_inbox_lets_child_then_parent_finish(
    tmp_path: Path,
) -> None:
    effects = tmp_path / "effects.txt"
    server = start(
        tmp_path / "runs.db", effects, tmp_path / "serve.log", agent="service_agent:team"
    )
    try:
        with server.client() as client:
            started = client.post("/api/agents/team/runs", json={"prompt": "charge 7"})
            assert started.status_code == 202, started.text
            root = started.json()["run_id"]

            def waiting() -> list[dict[str, Any]]:
                """the sub-agent's charge is in the inbox"""
                items: list[dict[str, Any]] = client.get("/api/approvals").json()["items"]
                return [i for i in items if i["tool"] == "charge"]

            [item] = wait_for(waiting)
            assert item["run_id"] != root  # it waits in the sub-agent's run
            mine = client.get("/api/approvals", params={"run_id": root}).json()["items"]
            assert mine == []  # the supervisor's call waits for its sub-agent, not a person
            child = client.get(f"/api/runs/{item['run_id']}").json()
            assert child["status"] == "awaiting_approval"
            assert not effects.exists()
            # a decision names the run the call waits in, as the inbox lists it
            via_parent = client.post(
                f"/api/runs/{root}/calls/{item['call_id']}/decision",
                json={"decision": "approve", "digest": item["digest"]},
                headers={"Idempotency-Key": "p"},
            )
            assert via_parent.status_code in (404, 409), via_parent.text  # never applied
            assert not effects.exists()

            decided = client.post(
                f"/api/runs/{item['run_id']}/calls/{item['call_id']}/decision",
                json={"decision": "approve", "digest": item["digest"]},
                headers={"Idempotency-Key": "k1"},
            )
            assert decided.status_code == 200, decided.text
            assert decided.json()["continues"] is True

            def finished() -> dict[str, Any] | None:
                """the supervisor's run finished"""
                run: dict[str, Any] = client.get(f"/api/runs/{root}").json()
                return run if run["status"] == "done" else None

            run = wait_for(finished)
            assert run["messages"][-1]["content"] == "the payer charged 7"
            assert client.get(f"/api/runs/{item['run_id']}").json()["status"] == "done"
    finally:
        stop(server)
    assert len(effects.read_text().splitlines()) == 1  # charged once
