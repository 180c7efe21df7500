"""External tools in the inbox, in a real Chromium (Debian's, driven by playwright): a
person's answer typed as text, a typed result as JSON with its field error shown, the run
finishing with both; the question a model wrote is shown as text, never run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from service_support import TESTS, TOKEN, Server, free_port, stop, wait_for
from support import forking
from test_service_pages import browser, browser_page, card

pytestmark = pytest.mark.slow
__all__ = ["browser", "browser_page"]  # the fixtures, shared with the other page tests


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "LOOPSTATE_TOKEN": TOKEN, "PYTHONPATH": path}
    args = ["serve", "--agent", "service_external_agent:agent", "--db", str(tmp_path / "runs.db"),
            "--port", str(port)]  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        process = forking.Popen(
            [sys.executable, "-m", "loopstate", *args], env=env, stdout=out, stderr=out
        )
    running = Server(f"http://127.0.0.1:{port}", process, log)

    def up() -> bool:
        """loopstate serve answers"""
        assert process.poll() is None, log.read_text()
        try:
            with running.client() as c:
                return c.get("/api/runs").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up)
        yield running
    finally:
        if process.poll() is None:
            stop(running)


def test_a_person_answers_external_calls_in_the_inbox(browser_page: Any, server: Server) -> None:
    page = browser_page
    with server.client() as client:
        started = client.post("/api/agents/agent/runs", json={"prompt": "release"})
        run_id = started.json()["run_id"]
        wait_for(
            lambda: (
                len(client.get("/api/approvals", params={"run_id": run_id}).json()["items"]) == 2
            )
        )
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        expect(page.locator("article.external")).to_have_count(2)
        ask = card(page, run_id, "ask_person")
        assert "<img src=x onerror=alert(1)>" in ask.locator(".arguments").inner_text()
        assert ask.get_by_role("button", name="Approve").count() == 0  # it takes an answer

        pick = card(page, run_id, "pick_in_browser")
        pick.locator("textarea").fill('{"colour": "red", "count": "many"}')
        pick.get_by_role("button", name="Send answer").click()
        error = pick.locator(".errors li")
        error.wait_for()
        assert error.get_attribute("data-field") == "value.count"
        assert "not of type 'integer'" in error.inner_text()

        ask.locator("textarea").fill("yes, ship it")
        ask.get_by_role("button", name="Send answer").click()
        pick.locator("textarea").fill('{"colour": "red", "count": 3}')
        pick.get_by_role("button", name="Send answer").click()
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
        run = client.get(f"/api/runs/{run_id}").json()
        answers = [m["content"] for m in run["messages"] if m["role"] == "tool"]
        assert answers == ["yes, ship it", '{"colour":"red","count":3}']
        assert {c["decided_by"] for c in run["calls"]} == {"http"}
        expect(page.locator("article")).to_have_count(0)
        assert page.dialogs == []  # nothing a model wrote ever ran
