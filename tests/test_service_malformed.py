"""No 500 for any input (issue 26): every route of the app `loopstate serve` runs, driven over
real HTTP with malformed ids, query values, headers and bodies, answers below 500 with an
`application/problem+json` body; the token is checked before the body is read; the pages set
their cookie only for the right token; the API's description is behind the token."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_support import TOKEN, Server, free_port, start, stop, wait_for
from support import forking

from loopstate import MemoryStore
from loopstate.service import Service, create_app

BAD_IDS = ["..", "%2e%2e", "%00", "a%0Ab", "%ff%fe", "\u00b2", "x" * 5000, "%F0%9F%98%80"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("malformed")
    running = start(tmp / "runs.db", tmp / "effects.txt", tmp / "serve.log")
    try:
        yield running
    finally:
        stop(running)


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def routes() -> list[tuple[str, str]]:
    """(method, path template) of every route the served app describes, and the docs."""
    import service_agent

    app = create_app(Service({"agent": service_agent.agent(MemoryStore())}, token=TOKEN))
    paths = app.openapi()["paths"]
    found = sorted((m.upper(), path) for path, ops in paths.items() for m in ops)
    assert len(found) >= 14, found
    return [*found, ("GET", "/openapi.json"), ("GET", "/docs")]


def cursor(fields: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")


NESTED = base64.urlsafe_b64encode(b"[" * 1500 + b"]" * 1500).decode()
NESTED_SHORT = base64.urlsafe_b64encode(b"[" * 700 + b"]" * 700).decode()  # within the bound
QUERIES: list[dict[str, str]] = [
    {"cursor": NESTED},
    {"cursor": NESTED_SHORT},
    {"cursor": cursor(["runs", int("9" * 1000), "r"])},
    {"cursor": cursor(["runs", int("9" * 4000), "r"])},
    {"cursor": cursor(["runs", float("inf"), "r"])},
    {"cursor": "x" * 20_000},
    {"cursor": cursor(["approvals", True, "r", "c"])},
    {"limit": "9" * 5000},
    {"limit": "-1"},
    {"limit": "abc"},
    {"last_event_id": "\u00b2"},
    {"last_event_id": "9" * 40},
    {"status": "\x00"},
    {"run_id": "\x00"},
]
BODIES: list[tuple[str, bytes, str]] = [
    ("not-json", b"{", "application/json"),
    ("array", b"[1, 2]", "application/json"),
    ("nested", b"[" * 100_000 + b"]" * 100_000, "application/json"),
    ("nan", b'{"prompt": NaN, "value": NaN, "decision": NaN, "text": NaN}', "application/json"),
    ("huge-number", b'{"value": ' + b"9" * 5000 + b"}", "application/json"),
    ("not-utf8", b'{"prompt": "\xff\xfe"}', "application/json"),
    ("form", b"prompt=hi", "application/x-www-form-urlencoded"),
    ("surrogate-key", b'{"\\ud800": 1}', "application/json"),
]


def answered(client: httpx.Client, method: str, url: str, **kw: Any) -> httpx.Response:
    """The response's head (and body unless it is a stream, which is closed at once)."""
    with client.stream(method, url, **kw) as response:
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.read()
        return response


def check(response: httpx.Response, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/problem+json", what
        body = response.json()
        assert body["status"] == response.status_code, what
        assert body["detail"], what


def filled(path: str, value: str) -> str:
    return re.sub(r"\{[a-z_]+\}", value, path)


@pytest.mark.parametrize(("method", "path"), routes())
def test_every_route_answers_malformed_input_below_500_with_a_problem(
    client: httpx.Client, method: str, path: str
) -> None:
    for bad in BAD_IDS:
        url = filled(path, bad)
        check(answered(client, method, url, json={}), f"{method} {url}")
    url = filled(path, "no-such-run")
    for query in QUERIES:
        check(answered(client, method, url, params=query), f"{method} {url} {query}")
    for header in ("\u00b2".encode(), b"1" * 40, b"-1", b"\xff"):
        response = answered(client, method, url, headers={"Last-Event-ID": header})  # type: ignore[dict-item]
        check(response, f"{method} {url} Last-Event-ID {header!r}")
    if method == "POST":
        for name, body, kind in BODIES:
            headers = {"Content-Type": kind, "Idempotency-Key": f"k-{name}"}
            check(answered(client, method, url, content=body, headers=headers), f"{url} {name}")


def test_a_cursor_nested_or_holding_a_huge_number_is_a_400(client: httpx.Client) -> None:
    for query in QUERIES[:7]:
        for path in ("/api/runs", "/api/approvals"):
            response = client.get(path, params=query)
            assert response.status_code == 400, (path, query, response.text)
            assert "invalid cursor" in response.json()["detail"]


def test_a_last_event_id_of_non_ascii_digits_is_a_400(client: httpx.Client) -> None:
    for value in ("\u00b2".encode(), "\u0663".encode(), b"1" * 13):
        response = client.get("/api/events", headers={"Last-Event-ID": value})  # type: ignore[dict-item]
        assert response.status_code == 400, value
        assert response.headers["content-type"] == "application/problem+json"


def test_unknown_routes_wrong_methods_and_bad_bodies_are_problems(client: httpx.Client) -> None:
    cases = [
        (client.get("/api/nope"), 404),
        (client.get("/nope"), 404),
        (client.delete("/api/runs"), 405),
        (client.put("/api/agents/agent/runs", json={"prompt": "x"}), 405),
        (client.post("/api/agents/agent/runs", content=b"{", headers=_json()), 400),
        (client.post("/api/agents/agent/runs", content=b"p=1", headers=_form()), 415),
        (
            client.post(
                "/api/agents/agent/runs", content=b"x" * (1024 * 1024 + 1), headers=_json()
            ),
            413,
        ),
        (client.post("/api/agents/agent/runs", json={"prompt": "x", "extra": 1}), 422),
    ]
    for response, status in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == status


def test_a_request_without_the_token_is_refused_before_its_body_is_read(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as anonymous:
        malformed = anonymous.post("/api/agents/agent/runs", json={"nothing": "valid"})
        assert malformed.status_code == 401  # not a 422 naming the fields
        assert malformed.headers["content-type"] == "application/problem+json"
        assert "errors" not in malformed.json()
        too_big = anonymous.post(
            "/api/agents/agent/runs", content=b"x" * (5 * 1024 * 1024), headers=_json()
        )
        assert too_big.status_code == 401
        for path in ("/openapi.json", "/docs"):
            assert anonymous.get(path).status_code == 401, path


def test_the_api_description_is_served_with_the_token(client: httpx.Client) -> None:
    spec = client.get("/openapi.json")
    assert spec.status_code == 200
    assert "/api/runs/{run_id}/calls/{call_id}/decision" in spec.json()["paths"]
    assert client.get("/docs").status_code == 200


def test_the_pages_set_the_cookie_only_for_the_right_token(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as browser:
        junk = browser.get("/ui/?token=junk")
        assert junk.status_code == 401
        assert "set-cookie" not in junk.headers
        assert junk.headers["content-type"] == "application/problem+json"
        right = browser.get(f"/ui/?token={TOKEN}", follow_redirects=False)
        assert right.status_code == 303
        assert f"loopstate_token={TOKEN}" in right.headers["set-cookie"]


def launch(tmp: Path, *args: str, **env: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    """`loopstate serve` with `args`, up once its (token-free) stylesheet is served."""
    port, log = free_port(), tmp / f"serve-{len(list(tmp.iterdir()))}.log"
    environ = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent),
        "LOOPSTATE_TOKEN": TOKEN,
        "LOOPSTATE_TEST_EFFECTS": str(tmp / "effects.txt"),
        **env,
    }
    command = [sys.executable, "-m", "loopstate", "serve", "--agent", "service_agent:agent",
               "--db", str(tmp / "runs.db"), "--port", str(port), *args]  # fmt: skip
    with log.open("ab") as out:
        process = forking.Popen(command, env=environ, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        """the server answers"""
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(f"{url}/ui/static/style.css", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(up)
    return process, url, log


def ended(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=15)


def test_a_given_token_is_never_printed_and_a_generated_one_is(tmp_path: Path) -> None:
    process, _, log = launch(tmp_path, "--token", "given-secret-1")
    ended(process)
    assert "given-secret-1" not in log.read_text()
    assert "/ui/?token=<your token>" in log.read_text()
    process, _, log = launch(tmp_path, LOOPSTATE_TOKEN="env-secret-2")
    ended(process)
    assert "env-secret-2" not in log.read_text()
    process, url, log = launch(tmp_path, LOOPSTATE_TOKEN="")
    try:
        printed = re.search(r"/ui/\?token=([A-Za-z0-9_-]+)", log.read_text())
        assert printed is not None, log.read_text()
        headers = {"Authorization": f"Bearer {printed.group(1)}"}
        assert httpx.get(f"{url}/api/runs", headers=headers, timeout=10).status_code == 200
    finally:
        ended(process)


def test_no_docs_serves_no_api_description(tmp_path: Path) -> None:
    process, url, _ = launch(tmp_path, "--no-docs")
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for path in ("/openapi.json", "/docs"):
            response = httpx.get(f"{url}{path}", headers=headers, timeout=10)
            assert response.status_code == 404, path
            assert response.headers["content-type"] == "application/problem+json"
    finally:
        ended(process)


def test_max_body_answers_413_over_the_limit(tmp_path: Path) -> None:
    process, url, _ = launch(tmp_path, "--max-body", "1000")
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        path = f"{url}/api/agents/agent/runs"
        big = httpx.post(path, json={"prompt": "x" * 1000}, headers=headers, timeout=10)
        assert big.status_code == 413
        assert big.headers["content-type"] == "application/problem+json"

        def chunks() -> Iterator[bytes]:
            yield b'{"prompt": "'
            for _ in range(100):
                yield b"x" * 100
            yield b'"}'

        chunked = httpx.post(path, content=chunks(), headers={**headers, **_json()}, timeout=10)
        assert chunked.status_code == 413  # no Content-Length: counted as it arrives
        small = httpx.post(path, json={"prompt": "hi"}, headers=headers, timeout=10)
        assert small.status_code == 202
    finally:
        ended(process)


def _json() -> dict[str, str]:
    return {"Content-Type": "application/json"}


def _form() -> dict[str, str]:
    return {"Content-Type": "application/x-www-form-urlencoded"}


def test_ids_and_query_values_no_database_takes_are_refused_on_postgres(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """PostgreSQL refuses text holding NUL: such a value never reaches it."""
    server = start(postgres_dsn, tmp_path / "effects.txt", tmp_path / "serve.log")
    try:
        with server.client() as client:
            for path, params in [
                ("/api/runs", {"status": "\x00"}),
                ("/api/approvals", {"run_id": "a\x00b"}),
                ("/api/approvals", {"tool": "\x00"}),
                ("/api/runs/a%00b", {}),
                ("/api/runs/a%00b/events", {}),
                ("/api/runs/a%00b/diagram.mmd", {}),
                ("/api/approvals", {"cursor": cursor(["approvals", 1.0, "r\x00", "c"])}),
                ("/api/runs", {"cursor": cursor(["runs", 1.0, "r\x00"])}),
            ]:
                check(answered(client, "GET", path, params=params), f"{path} {params}")
                assert client.get(path, params=params).status_code in (400, 404)
            decision = client.post(
                "/api/runs/a%00b/calls/c%00/decision",
                json={"decision": "approve", "digest": "d"},
                headers={"Idempotency-Key": "k"},
            )
            check(decision, "decision")
    finally:
        stop(server)
