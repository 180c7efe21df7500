"""The inbox and run pages in a real Chromium (Debian's, driven by playwright; no download):
approve one call, deny another with a reason, see an invalid edit's field error, watch the
run page's highlighted state change live, reload and find the same state."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from service_support import TOKEN, Server, serving, wait_for
from support.waiting import MARGIN

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module's page tests (its start costs about as much CPU as a test);
    each test gets a fresh context of its own in `browser_page`. While it is open, playwright
    marks its event loop as running in this thread: a module that uses it has no asyncio test."""
    from playwright.sync_api import sync_playwright

    assert shutil.which("chromium"), "scripts/setup installs Debian's chromium"
    # expect()'s 5 s default is a bet on the machine's speed (a live update missed it beside
    # another suite): the shared margin for a stuck page instead, not a time relied on.
    expect.set_options(timeout=MARGIN * 1000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(browser: Any) -> Iterator[Any]:
    """A page in a new context (no cookies, storage or pages of another test's)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    dialogs: list[str] = []
    context.on("page", lambda p: p.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss())))
    page = context.new_page()
    page.dialogs = dialogs
    yield page
    context.close()


def start_run(client: httpx.Client) -> str:
    run_id: str = client.post("/api/agents/agent/runs", json={"prompt": "pay"}).json()["run_id"]
    wait_for(
        lambda: len(client.get("/api/approvals", params={"run_id": run_id}).json()["items"]) == 2
    )
    return run_id


def card(page: Any, run_id: str, tool: str) -> Any:
    return page.locator(f"article[data-run='{run_id}']", has=page.locator(f"h3:text-is('{tool}')"))


def test_a_person_decides_in_the_inbox_and_watches_the_run_live(
    browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    with serving(tmp_path) as server, server.client() as client:
        first, second = start_run(client), start_run(client)
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        assert page.url == f"{server.url}/ui/"  # the token left the address
        page.wait_for_selector("article", state="attached")
        assert page.locator("article").count() == 4
        email = card(page, first, "send_email")
        assert "<script>alert(1)</script>" in email.locator(".arguments").inner_text()

        card(page, first, "charge").get_by_role("button", name="Approve").click()
        email.get_by_placeholder("reason").fill("not to ops")
        email.get_by_role("button", name="Deny").click()
        wait_for(lambda: client.get(f"/api/runs/{first}").json()["status"] == "done")
        run = client.get(f"/api/runs/{first}").json()
        assert {c["tool"]: c["decision"] for c in run["calls"]} == {
            "charge": "approve",
            "send_email": "deny",
        }
        assert "not to ops" in run["messages"][-2]["content"]

        charge = card(page, second, "charge")
        charge.locator("summary").click()
        charge.locator("textarea").fill('{"amount": "lots"}')
        charge.get_by_role("button", name="Run with these arguments").click()
        error = charge.locator(".errors li")
        error.wait_for()
        assert error.get_attribute("data-field") == "amount"
        assert "not of type 'integer'" in error.inner_text()
        expect(page.locator("article")).to_have_count(
            2
        )  # (the CSP forbids wait_for_function's eval)
        page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)

        run_page = page.context.new_page()
        run_page.goto(f"{server.url}/ui/runs/{second}")
        run_page.wait_for_selector("#diagram[data-current='awaiting_approval']", state="attached")
        assert run_page.locator("#diagram svg").count() == 1
        run_page.evaluate("window.notReloaded = true")
        decide_all(client, second)
        run_page.wait_for_selector("#diagram[data-current='done']", state="attached", timeout=15000)
        assert run_page.evaluate("window.notReloaded") is True
        assert run_page.locator("#status").inner_text() == "done"
        run_page.screenshot(path=str(tmp_path / "run.png"), full_page=True)

        run_page.reload()
        run_page.wait_for_selector("#diagram[data-current='done']", state="attached")
        assert run_page.locator("#transitions tr").count() == 5
        assert page.dialogs == []  # no script a model chose ever ran
    keep = Path("/tmp/service-screenshots")
    keep.mkdir(exist_ok=True)
    for name in ("inbox.png", "run.png"):
        shutil.copy(tmp_path / name, keep / name)


def decide_all(client: httpx.Client, run_id: str) -> None:
    for item in client.get("/api/approvals", params={"run_id": run_id}).json()["items"]:
        path = f"/api/runs/{run_id}/calls/{item['call_id']}/decision"
        body = {"decision": "approve", "digest": item["digest"]}
        assert client.post(path, json=body, headers={"Idempotency-Key": item["call_id"]}).is_success


def test_the_pages_need_the_token(tmp_path: Path, browser_page: Any) -> None:
    with serving(tmp_path) as server:
        response = browser_page.goto(f"{server.url}/ui/")
        assert response.status == 401
        assert _server_alive(server)


def _server_alive(server: Server) -> bool:
    with server.client() as c:
        return c.get("/api/runs").status_code == 200


def test_a_live_update_leaves_the_card_being_typed_in_alone(
    tmp_path: Path, browser_page: Any
) -> None:
    page = browser_page
    with serving(tmp_path) as server, server.client() as client:
        first = start_run(client)
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        page.wait_for_selector("article", state="attached")
        reason = card(page, first, "send_email").get_by_placeholder("reason")
        reason.fill("half-typed")
        second = start_run(client)  # another run's calls arrive while the person types
        expect(page.locator("article")).to_have_count(4)
        assert reason.evaluate("node => node === document.activeElement")
        assert card(page, second, "charge").count() == 1
        page.reload()
        assert (
            card(page, first, "send_email").get_by_placeholder("reason").input_value()
            == "half-typed"
        )


# Counts the live updates the page receives (EventSource's own events, counted as they arrive).
_COUNT_UPDATES = """
const listen = EventSource.prototype.addEventListener;
EventSource.prototype.addEventListener = function (type, handler, ...rest) {
  const counted = function (event) {
    const page = document.documentElement;
    if (type === "run") page.dataset.updates = Number(page.dataset.updates || 0) + 1;
    return handler.call(this, event);
  };
  return listen.call(this, type, counted, ...rest);
};
"""


def test_an_update_that_arrives_while_the_inbox_refreshes_is_not_lost(
    tmp_path: Path, browser_page: Any
) -> None:
    """A refresh's last read (the runs a deploy made incompatible) is held until another run's
    calls have arrived and their update reached the page: the inbox goes round again and
    shows them (it went no further when the update came during that read, and waited for the
    next one, which a quiet service never sends)."""
    page = browser_page
    held: list[Any] = []
    released = False

    def hold(route: Any) -> None:
        if released:
            route.continue_()
        else:
            held.append(route)

    page.add_init_script(_COUNT_UPDATES)
    page.route(lambda url: "compatible=false" in url, hold)
    with serving(tmp_path) as server, server.client() as client:
        first = start_run(client)
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        expect(card(page, first, "charge")).to_have_count(1)
        expect(page.locator("#live")).to_have_text("live")
        seen = page.locator("html").get_attribute("data-updates")  # the first run is quiet
        second = start_run(client)
        if seen is None:  # its update reached the page (the page's policy forbids eval)
            expect(page.locator("html")).to_have_attribute("data-updates", re.compile(r"\d"))
        else:
            expect(page.locator("html")).not_to_have_attribute("data-updates", seen)
        assert held, "the refresh's last read was not held"
        released = True
        for route in held:
            route.continue_()
        expect(card(page, second, "charge")).to_have_count(1)
        expect(page.locator("article")).to_have_count(4)
