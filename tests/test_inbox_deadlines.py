"""A pending call's approval deadline on the inbox and run pages, in a real Chromium over a
real server process (`deadline_inbox_server.py`): each card says how long is left, or that
its deadline has passed, and the inbox lists the calls whose decision is due first first, as
`loopstate runs pending` does (calls without a deadline last)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from service_support import TESTS, TOKEN, Server, free_port, stop, wait_for
from service_support import start as start_server
from support.cli import loopstate
from test_service_pages import browser, browser_page, card

pytestmark = pytest.mark.slow
__all__ = ["browser", "browser_page"]  # the fixtures, shared with the other page tests

AGENTS = ("open", "later", "expired", "soon")
"""Started in this order; due first: expired, soon, later, then open (no deadline)."""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("deadlines") / "runs.db"


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Server]:
    tmp, port = db.parent, free_port()
    command = (str(TESTS / "deadline_inbox_server.py"), str(port), str(db))
    running = start_server(db, tmp / "effects.txt", tmp / "serve.log", port, command=command)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            stop(running)


@pytest.fixture(scope="module")
def runs(server: Server) -> dict[str, str]:
    """One waiting run of each agent, by agent."""
    with server.client() as client:
        return {name: start(client, name) for name in AGENTS}


def start(client: httpx.Client, agent: str) -> str:
    run_id: str = client.post(f"/api/agents/{agent}/runs", json={"prompt": "go"}).json()["run_id"]
    wait_for(
        lambda: len(client.get("/api/approvals", params={"run_id": run_id}).json()["items"]) == 1
    )
    return run_id


def test_the_inbox_shows_each_deadline_and_lists_the_soonest_first(
    server: Server, runs: dict[str, str], browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    page.goto(f"{server.url}/ui/?token={TOKEN}")
    cards = page.locator("article")
    expect(cards).to_have_count(4)
    order = [cards.nth(i).get_attribute("data-run") for i in range(4)]
    assert order == [runs[name] for name in ("expired", "soon", "later", "open")]
    expired = card(page, runs["expired"], "publish").locator(".deadline")
    expect(expired).to_have_text(re.compile(r"^expired (1\.9|2\.0) h ago \(was due "))
    expect(expired).to_have_class(re.compile(r"\bexpired\b"))
    soon = card(page, runs["soon"], "publish").locator(".deadline")
    expect(soon).to_have_text(re.compile(r"^due in (9|10) min \(at "))
    expect(soon).not_to_have_class(re.compile(r"\bexpired\b"))
    later = card(page, runs["later"], "publish").locator(".deadline")
    expect(later).to_have_text(re.compile(r"^due in (1\.9|2\.0) h \(at "))
    expect(card(page, runs["open"], "publish").locator(".deadline")).to_have_count(0)
    text = card(page, runs["soon"], "publish").locator(".arguments").inner_text()
    assert "<img src=x onerror=alert(1)> news" in text  # the model's words, as text
    page.screenshot(path=str(tmp_path / "inbox-deadlines.png"), full_page=True)
    assert page.dialogs == []


def test_the_run_page_shows_the_pending_calls_deadline(
    server: Server, runs: dict[str, str], browser_page: Any
) -> None:
    page = browser_page
    page.goto(f"{server.url}/ui/runs/{runs['soon']}?token={TOKEN}")
    deadline = page.locator("#pending article .deadline")
    expect(deadline).to_have_text(re.compile(r"^due in (9|10) min \(at "))
    page.goto(f"{server.url}/ui/runs/{runs['expired']}")
    expect(page.locator("#pending article .deadline")).to_have_text(re.compile(r"^expired "))


def test_runs_pending_lists_the_runs_in_the_inbox_order(
    db: Path, runs: dict[str, str], tmp_path: Path
) -> None:
    listed = loopstate("runs", "pending", "--db", str(db), cwd=tmp_path).stdout
    found = [name for name in AGENTS if runs[name] in listed]
    assert found == list(AGENTS)
    at = {name: listed.index(runs[name]) for name in AGENTS}
    assert sorted(AGENTS, key=at.__getitem__) == ["expired", "soon", "later", "open"]
