"""Hostile input over real HTTP to a real `loopstate serve` (issue 26): a lone surrogate
(legal in JSON) anywhere a person's text enters a run is made storable, so the decision is
recorded exactly once and the run finishes — never stuck, never `failed`; an external result
is validated like arguments (NaN, Infinity, depth, size: 422 naming the field, nothing
recorded); booleans are JSON booleans."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_support import Server, start, stop, wait_for

LONE = "\ud800"
REPLACED = "\ufffd"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("hostile")
    running = start(
        tmp / "runs.db", tmp / "effects.txt", tmp / "serve.log", agent="service_hostile_agent:agent"
    )
    try:
        yield running
    finally:
        stop(running)


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def post_raw(
    client: httpx.Client, path: str, payload: Any, key: str | None = None
) -> httpx.Response:
    """`payload` as JSON with `\\uXXXX` escapes (how a lone surrogate travels in JSON)."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(path, content=json.dumps(payload, ensure_ascii=True), headers=headers)


def waiting_run(client: httpx.Client, prompt: str = "pay") -> tuple[str, dict[str, Any]]:
    response = post_raw(client, "/api/agents/agent/runs", {"prompt": prompt})
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]

    def pending() -> dict[str, Any] | None:
        """the run's three calls wait in /api/approvals"""
        items = client.get("/api/approvals", params={"run_id": run_id}).json()["items"]
        return {i["tool"]: i for i in items} if len(items) == 3 else None

    return run_id, wait_for(pending)


def decide(client: httpx.Client, item: dict[str, Any], key: str, **body: Any) -> httpx.Response:
    path = f"/api/runs/{item['run_id']}/calls/{item['call_id']}/decision"
    return post_raw(client, path, {"decision": "approve", "digest": item["digest"], **body}, key)


def supply(client: httpx.Client, item: dict[str, Any], key: str, value: Any) -> httpx.Response:
    path = f"/api/runs/{item['run_id']}/calls/{item['call_id']}/result"
    return post_raw(client, path, {"value": value}, key)


def finish(client: httpx.Client, items: dict[str, Any], *skip: str) -> None:
    """Decide every call not in `skip` plainly (an external call gets a plain result)."""
    for tool, item in items.items():
        if tool in skip:
            continue
        if tool == "fetch_data":
            assert supply(client, item, f"r-{item['run_id']}", {"rows": 1}).status_code == 200
        else:
            assert decide(client, item, f"a-{item['run_id']}-{tool}").status_code == 200


def ended(client: httpx.Client, run_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        """the run has ended"""
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        return run if run["status"] in ("done", "failed", "aborted") else None

    return wait_for(done)


def call_of(run: dict[str, Any], tool: str) -> dict[str, Any]:
    return next(c for c in run["calls"] if c["tool"] == tool)


def test_a_lone_surrogate_in_a_deny_reason_is_recorded_once_and_the_run_finishes(
    client: httpx.Client,
) -> None:
    run_id, items = waiting_run(client)
    assert (
        decide(client, items["charge"], "d1", decision="deny", reason=f"no{LONE}").status_code
        == 200
    )
    finish(client, items, "charge")
    run = ended(client, run_id)
    assert run["status"] == "done", run["error"]
    charge = call_of(run, "charge")
    assert (charge["decision"], charge["status"]) == ("deny", "denied")
    assert any(f"no{REPLACED}" in (m.get("content") or "") for m in run["messages"])


def test_a_lone_surrogate_in_a_deny_message_reaches_the_model_replaced(
    client: httpx.Client,
) -> None:
    run_id, items = waiting_run(client)
    response = decide(client, items["charge"], "d2", decision="deny", message=f"stop{LONE}")
    assert response.status_code == 200
    finish(client, items, "charge")
    run = ended(client, run_id)
    assert run["status"] == "done", run["error"]
    assert any(m.get("content") == f"stop{REPLACED}" for m in run["messages"])


def test_a_lone_surrogate_in_edited_arguments_runs_the_edit(client: httpx.Client) -> None:
    run_id, items = waiting_run(client)
    edit = {"to": f"a{LONE}@example.com", "body": "x"}
    response = decide(client, items["send_email"], "e1", decision="edit", arguments=edit)
    assert response.status_code == 200, response.text
    finish(client, items, "send_email")
    run = ended(client, run_id)
    assert run["status"] == "done", run["error"]
    assert call_of(run, "send_email")["executed_arguments"]["to"] == f"a{REPLACED}@example.com"


def test_a_lone_surrogate_in_a_remembered_rule_keeps_the_rule(client: httpx.Client) -> None:
    run_id, items = waiting_run(client)
    rule = {"name": f"pay{LONE}", "tools": ["charge"]}
    assert decide(client, items["charge"], "m1", remember=rule).status_code == 200
    finish(client, items, "charge")
    run = ended(client, run_id)
    assert run["status"] == "done", run["error"]
    assert [r["rule"]["name"] for r in run["remembered"]] == [f"pay{REPLACED}"]


def test_a_lone_surrogate_in_an_external_result_finishes_the_run(client: httpx.Client) -> None:
    run_id, items = waiting_run(client)
    assert supply(client, items["fetch_data"], "x1", {"note": f"n{LONE}"}).status_code == 200
    finish(client, items, "fetch_data")
    run = ended(client, run_id)
    assert run["status"] == "done", run["error"]
    assert any(f"n{REPLACED}" in (m.get("content") or "") for m in run["messages"])


def test_a_lone_surrogate_in_an_abort_reason_aborts_once_and_never_leaves_it_busy(
    client: httpx.Client,
) -> None:
    run_id, _ = waiting_run(client)
    response = post_raw(client, f"/api/runs/{run_id}/abort", {"reason": f"stop{LONE}"})
    assert response.status_code == 200, response.text
    run = ended(client, run_id)
    assert run["status"] == "aborted"
    assert run["transitions"][-1]["reason"] == f"stop{REPLACED}"
    again = post_raw(client, f"/api/runs/{run_id}/abort", {"reason": "again"})
    assert again.status_code == 409
    assert "busy" not in again.json()["detail"]


def test_a_lone_surrogate_in_a_prompt_and_a_message_is_stored_replaced(
    client: httpx.Client,
) -> None:
    run_id, items = waiting_run(client, prompt=f"pay{LONE}")
    finish(client, items)
    assert ended(client, run_id)["status"] == "done"
    response = post_raw(client, f"/api/runs/{run_id}/messages", {"text": f"thanks{LONE}"})
    assert response.status_code == 202, response.text
    wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["steps"] == 3)
    run = ended(client, run_id)
    users = [m["content"] for m in run["messages"] if m["role"] == "user"]
    assert users == [f"pay{REPLACED}", f"thanks{REPLACED}"]


@pytest.mark.parametrize(
    ("case", "raw"),
    [
        ("nan", '{"value": {"x": NaN}}'),
        ("infinity", '{"value": {"x": Infinity}}'),
        ("minus_infinity", '{"value": {"x": [-Infinity]}}'),
        ("500_levels_deep", '{"value": {"x": ' + "[" * 500 + "]" * 500 + "}}"),
        ("65_levels_deep", '{"value": {"x": ' + "[" * 64 + "]" * 64 + "}}"),
    ],
)
def test_an_external_result_that_is_not_storable_json_is_a_422_and_nothing_is_recorded(
    client: httpx.Client, case: str, raw: str
) -> None:
    run_id, items = waiting_run(client)
    path = f"/api/runs/{run_id}/calls/{items['fetch_data']['call_id']}/result"
    headers = {"Content-Type": "application/json", "Idempotency-Key": f"bad-{case}"}
    response = client.post(path, content=raw, headers=headers)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == "value"
    assert client.get(f"/api/runs/{run_id}").json()["queued"] == []
    assert supply(client, items["fetch_data"], f"ok-{case}", {"fine": [1.5]}).status_code == 200


def test_an_external_result_64_levels_deep_is_taken(client: httpx.Client) -> None:
    _, items = waiting_run(client)
    value = {"x": json.loads("[" * 63 + "]" * 63)}
    assert supply(client, items["fetch_data"], "deep-ok", value).status_code == 200


def test_an_external_result_larger_than_the_bound_is_a_422(client: httpx.Client) -> None:
    run_id, items = waiting_run(client)
    response = supply(client, items["fetch_data"], "big", {"x": "y" * 1_000_001})
    assert response.status_code == 422, response.text  # under the 1 MiB body limit
    assert response.headers["content-type"] == "application/problem+json"
    assert client.get(f"/api/runs/{run_id}").json()["queued"] == []


@pytest.mark.parametrize("value", ["yes", 1, "true", None])
def test_remember_is_a_json_boolean_or_a_rule(client: httpx.Client, value: Any) -> None:
    run_id, items = waiting_run(client)
    response = decide(client, items["charge"], f"rem-{value}", remember=value)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"].startswith("remember")
    run = client.get(f"/api/runs/{run_id}").json()
    assert (run["queued"], run["remembered"]) == ([], [])


@pytest.mark.parametrize(
    ("case", "arguments"),
    [
        ("nan", '{"to": NaN, "body": "x"}'),
        ("70_levels_deep", '{"to": "a", "body": ' + "[" * 70 + "]" * 70 + "}"),
    ],
)
def test_edited_arguments_that_are_not_storable_json_are_a_422_naming_arguments(
    client: httpx.Client, case: str, arguments: str
) -> None:
    run_id, items = waiting_run(client)
    item = items["send_email"]
    raw = (
        f'{{"decision": "edit", "digest": "{item["digest"]}", "arguments": {arguments}}}'
    ).encode()
    path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
    headers = {"Content-Type": "application/json", "Idempotency-Key": f"edit-{case}"}
    response = client.post(path, content=raw, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "arguments"
    assert client.get(f"/api/runs/{run_id}").json()["queued"] == []
