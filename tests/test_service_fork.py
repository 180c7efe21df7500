"""`POST /api/runs/{run_id}/fork` against a real `loopstate serve` process: 201 with the new
id (the same one for a repeated Idempotency-Key), problem+json 404/409/422."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

import httpx
import pytest
from service_support import Server, serving, wait_for
from test_service_api import decide, problem, start_run


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("serve")) as running:
        yield running


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def finished_run(client: httpx.Client) -> str:
    run_id, items = start_run(client)
    for n, item in enumerate(items):
        assert decide(client, item, f"{run_id}-{n}").status_code == 200
    wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
    return run_id


def effects(server: Server) -> list[str]:
    return server.log.with_name("effects.txt").read_text().splitlines()


def test_a_fork_at_the_decisions_is_created_once_and_waits_for_new_ones(
    client: httpx.Client, server: Server
) -> None:
    run_id = finished_run(client)
    charged = effects(server)
    key = {"Idempotency-Key": f"fork-{run_id}"}
    first = client.post(f"/api/runs/{run_id}/fork", json={"at": 2}, headers=key)
    again = client.post(f"/api/runs/{run_id}/fork", json={"at": 2}, headers=key)
    assert first.status_code == again.status_code == 201
    fork_id = first.json()["run_id"]
    assert again.json()["run_id"] == fork_id != run_id

    fork = client.get(f"/api/runs/{fork_id}").json()
    assert fork["forked_from"]["run_id"] == run_id
    assert fork["forked_from"]["seq"] == 2
    assert fork["status"] == "awaiting_approval"
    assert len(fork["pending"]) == 2
    assert len(fork["transitions"]) == 2
    assert effects(server) == charged


def test_forks_that_cannot_be_made_are_problems(client: httpx.Client, server: Server) -> None:
    run_id = finished_run(client)
    assert (
        "no run 'nope'"
        in problem(client.post("/api/runs/nope/fork", json={"at": 1}), 404)["detail"]
    )
    detail = problem(client.post(f"/api/runs/{run_id}/fork", json={"at": 99}), 422)["detail"]
    assert f"run {run_id} has no transition 99" in detail
    edit = {"at": 2, "replace_result": {"ghost": "x"}}
    assert (
        "no result of call 'ghost'"
        in problem(client.post(f"/api/runs/{run_id}/fork", json=edit), 422)["detail"]
    )
    problem(client.post(f"/api/runs/{run_id}/fork", json={"at": "two"}), 422)

    with sqlite3.connect(server.log.with_name("runs.db")) as db:
        db.execute("UPDATE runs SET lease_owner = 'other-host:1:x', lease_until = ? "
                   "WHERE run_id = ?", (time.time() + 60, run_id))  # fmt: skip
    assert (
        "run busy"
        in problem(client.post(f"/api/runs/{run_id}/fork", json={"at": 2}), 409)["detail"]
    )


def test_a_fork_body_is_strict_and_its_text_made_storable(
    client: httpx.Client, server: Server
) -> None:
    run_id = finished_run(client)
    url = f"/api/runs/{run_id}/fork"
    for loose in ({"at": "2"}, {"at": 2, "replace_message": ["0", "x"]}, {"at": 2, "x": 1}):
        problem(client.post(url, json=loose), 422)
    raw = b'{"at": 2, "replace_message": [0, "pay me \\ud800 twice"]}'
    made = client.post(url, content=raw, headers={"Content-Type": "application/json"})
    assert made.status_code == 201, made.text
    fork = client.get(f"/api/runs/{made.json()['run_id']}").json()
    assert fork["messages"][0] == {"role": "user", "content": "pay me \ufffd twice"}
