"""The HTTP API over real HTTP to a real `loopstate serve` on 127.0.0.1: a run waits in the
inbox, is decided and finishes; every refusal has its status and a problem+json body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_support import Server, serving, wait_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("serve")) as running:
        yield running


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def start_run(client: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    response = client.post("/api/agents/agent/runs", json={"prompt": "pay the invoice"})
    assert response.status_code == 202
    run_id = response.json()["run_id"]

    def pending() -> list[dict[str, Any]]:
        """the run's two calls are in /api/approvals"""
        items = client.get("/api/approvals", params={"run_id": run_id}).json()["items"]
        return items if len(items) == 2 else []

    return run_id, wait_for(pending)


def decide(client: httpx.Client, item: dict[str, Any], key: str, **body: Any) -> httpx.Response:
    path = f"/api/runs/{item['run_id']}/calls/{item['call_id']}/decision"
    payload = {"decision": "approve", "digest": item["digest"], **body}
    return client.post(path, json=payload, headers={"Idempotency-Key": key})


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["detail"]
    return body


def test_a_run_waits_in_the_inbox_then_continues_and_finishes_once_decided(
    client: httpx.Client, server: Server
) -> None:
    run_id, items = start_run(client)
    assert {i["tool"] for i in items} == {"charge", "send_email"}
    charge = next(i for i in items if i["tool"] == "charge")
    email = next(i for i in items if i["tool"] == "send_email")
    assert charge["arguments"] == {"amount": 5}
    assert charge["reason"]

    first = decide(client, charge, "k1")
    assert first.status_code == 200
    assert first.json()["continues"] is False
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "awaiting_approval"
    second = decide(client, email, "k2", decision="deny", reason="not now")
    assert second.json()["continues"] is True

    def done() -> dict[str, Any] | None:
        """the run is done"""
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        return run if run["status"] == "done" else None

    run = wait_for(done)
    moves = [(t["from"], t["to"], t["actor"]) for t in run["transitions"]]
    assert ("awaiting_approval", "executing_tool", "http") in moves
    calls = {c["tool"]: (c["status"], c["decision"], c["decided_by"]) for c in run["calls"]}
    assert calls == {"charge": ("succeeded", "approve", "http"),
                     "send_email": ("denied", "deny", "http")}  # fmt: skip
    assert run["output"] == "all done"
    assert run["pending"] == []
    summaries = client.get("/api/runs", params={"status": "done"}).json()["items"]
    assert run_id in [s["run_id"] for s in summaries]


def test_a_decision_over_http_remembers_a_rule_and_gives_the_model_its_own_words(
    client: httpx.Client,
) -> None:
    run_id, items = start_run(client)
    charge = next(i for i in items if i["tool"] == "charge")
    email = next(i for i in items if i["tool"] == "send_email")
    refused = decide(client, charge, "r1", decision="edit", arguments={"amount": 1}, remember=True)
    assert problem(refused, 422)["errors"][0]["field"] == "remember"
    no_selector = decide(client, charge, "r2", remember={"name": "nothing"})
    assert "remember" in problem(no_selector, 422)["detail"]
    misplaced = decide(client, charge, "r3", message="only a denial says this")
    assert problem(misplaced, 422)["errors"][0]["field"] == "message"
    assert decide(client, charge, "k1", remember={"pattern": "char*"}).status_code == 200
    words = "Emails go out on Mondays only."
    denied = decide(client, email, "k2", decision="deny", reason="policy", message=words,
                    remember=True)  # fmt: skip
    assert denied.status_code == 200

    def done() -> dict[str, Any] | None:
        """the run is done"""
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        return run if run["status"] == "done" else None

    run = wait_for(done)
    told = [m["content"] for m in run["messages"] if m.get("tool_call_id") == email["call_id"]]
    assert told == [words]
    standing = {(r["tool"], (r["rule"] or {}).get("pattern"), r["decision"], r["by"])
                for r in run["remembered"]}  # fmt: skip
    assert standing == {(None, "char*", "approve", "http"), ("send_email", None, "deny", "http")}


def test_every_refusal_has_its_status(client: httpx.Client, server: Server) -> None:
    run_id, items = start_run(client)
    charge = next(i for i in items if i["tool"] == "charge")
    email = next(i for i in items if i["tool"] == "send_email")
    path = f"/api/runs/{run_id}/calls/{charge['call_id']}/decision"
    problem(client.post(path, json={"decision": "approve", "digest": charge["digest"]}), 400)
    with httpx.Client(base_url=server.url) as anonymous:
        problem(anonymous.get("/api/runs"), 401)
    with server.client(Authorization="Bearer wrong") as wrong:
        problem(wrong.get("/api/approvals"), 401)
    with server.client(Origin="https://evil.example") as foreign:
        problem(
            foreign.post(path, json={"decision": "approve"}, headers={"Idempotency-Key": "x"}), 403
        )
    problem(client.get("/api/runs/nope"), 404)
    problem(decide(client, {**charge, "call_id": "call_9_9"}, "k404"), 404)
    problem(decide(client, charge, "stale", digest="0000000000000000"), 409)
    invalid = problem(
        decide(client, charge, "bad-edit", decision="edit", arguments={"amount": "x"}), 422
    )
    assert invalid["errors"] == [{"field": "amount", "message": "'x' is not of type 'integer'"}]
    missing = problem(decide(client, charge, "missing", decision="edit", arguments={}), 422)
    assert missing["errors"][0]["field"] == "amount"

    assert decide(client, charge, "k-approve").status_code == 200
    again = decide(client, charge, "k-approve")  # same key, same body: the first answer
    assert again.status_code == 200
    assert again.json()["call_id"] == charge["call_id"]
    problem(decide(client, charge, "k-approve", decision="deny", reason="no"), 422)
    problem(decide(client, charge, "k-other"), 409)  # already decided
    problem(client.post("/api/agents/nobody/runs", json={"prompt": "x"}), 404)
    problem(client.post("/api/agents/agent/runs", json={"prompt": 3}), 422)

    assert client.post(f"/api/runs/{run_id}/abort", json={"reason": "stop"}).status_code == 200
    problem(decide(client, email, "after-abort"), 409)  # the run has ended
    problem(client.post(f"/api/runs/{run_id}/abort", json={"reason": "again"}), 409)
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "aborted"
    assert run["transitions"][-1]["actor"] == "http"


def test_twenty_concurrent_decisions_on_one_call_apply_once(
    client: httpx.Client, server: Server, tmp_path: Path
) -> None:
    import asyncio

    run_id, items = start_run(client)
    charge = next(i for i in items if i["tool"] == "charge")
    email = next(i for i in items if i["tool"] == "send_email")
    path = f"/api/runs/{run_id}/calls/{charge['call_id']}/decision"
    body = {"decision": "approve", "digest": charge["digest"]}

    async def race() -> list[int]:
        headers = {"Authorization": client.headers["Authorization"]}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=20) as c:
            answers = await asyncio.gather(
                *(c.post(path, json=body, headers={"Idempotency-Key": f"r{i}"}) for i in range(20))
            )
        return [a.status_code for a in answers]

    statuses = asyncio.run(race())
    assert sorted(statuses) == [200] + [409] * 19
    assert decide(client, email, "email").status_code == 200
    wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
    effects = (server.log.parent / "effects.txt").read_text().splitlines()
    assert [line for line in effects if line.startswith(run_id)] == [
        f"{run_id} {charge['call_id']} 5"
    ]


def test_pages_take_the_token_once_and_refuse_other_origins(server: Server) -> None:
    with httpx.Client(base_url=server.url) as browser:
        problem(browser.get("/ui/"), 401)
        landing = browser.get("/ui/?token=test-token-123")
        assert landing.status_code == 303
        assert landing.headers["location"] == "/ui/"
        assert "HttpOnly" in landing.headers["set-cookie"]
        page = browser.get("/ui/")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert browser.get("/api/approvals").status_code == 200  # the cookie
        refused = browser.post(
            "/api/agents/agent/runs",
            json={"prompt": "x"},
            headers={"Origin": "http://attacker.test"},
        )
        problem(refused, 403)
        fetched = browser.post(
            "/api/agents/agent/runs", json={"prompt": "x"}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        problem(fetched, 403)
        same = browser.post(
            "/api/agents/agent/runs", json={"prompt": "x"}, headers={"Origin": server.url}
        )
        assert same.status_code == 202


def test_a_message_continues_a_run_that_answered(client: httpx.Client) -> None:
    run_id, items = start_run(client)
    path = f"/api/runs/{run_id}/messages"
    problem(client.post(path, json={"text": "thanks"}), 409)  # still awaiting approval
    for item in items:
        assert decide(client, item, f"m-{item['call_id']}").status_code == 200
    wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
    problem(client.post(path, json={"text": " "}), 422)
    assert client.post(path, json={"text": "thanks"}).status_code == 202

    def answered_again() -> dict[str, Any] | None:
        """the run answered the follow-up"""
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        return run if run["output"] == "glad to help" else None

    run = wait_for(answered_again)
    follow_up = [t for t in run["transitions"] if t["event"] == "user_message"]
    assert [(t["from"], t["to"], t["actor"]) for t in follow_up] == [("done", "thinking", "http")]
    assert run["messages"][-2] == {"role": "user", "content": "thanks"}
