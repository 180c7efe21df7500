"""The inbox people use all day, in a real Chromium (Debian's, driven by playwright) over a
real server process (`inbox_server.py`): a write's diff on its card, deciding from the run
page, the conversation as turns, the failed tab and Retry of a `model_failed` run (a real
model server answering 503, then a reply), two teams each seeing and deciding only their
own runs (pages, API and SSE), keyboard-only approval with labelled controls. Screenshots of
the inbox and a run page at 1280 px are saved under the test's tmp dir (path printed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from model_server import ModelServer, error_reply, serve, text_reply
from playwright.sync_api import expect
from service_support import TESTS, TOKEN, Server, free_port, read_events, stop, wait_for
from service_support import start as start_server
from test_service_pages import browser, browser_page, card

pytestmark = pytest.mark.slow
__all__ = ["browser", "browser_page"]  # the fixtures, shared with the other page tests

NOTES = "# Notes\n\nThe agent loop is drivn by a state machine.\n"


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with serve(error_reply(503), text_reply("recovered after a retry")) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: ModelServer) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("inbox")
    workspace = tmp / "workspace"
    workspace.mkdir()
    (workspace / "notes.md").write_text(NOTES)
    port, db = free_port(), tmp / "runs.db"
    script = (str(TESTS / "inbox_server.py"), str(port), str(db), str(workspace))
    running = start_server(
        db, tmp / "effects.txt", tmp / "serve.log", port, command=(*script, model.openai_base)
    )
    try:
        yield running
    finally:
        if running.process.poll() is None:
            stop(running)


def start(client: httpx.Client, agent: str, prompt: str, calls: int) -> str:
    run_id: str = client.post(f"/api/agents/{agent}/runs", json={"prompt": prompt}).json()["run_id"]
    wait_for(
        lambda: (
            len(client.get("/api/approvals", params={"run_id": run_id}).json()["items"]) == calls
        )
    )
    return run_id


def shots(tmp_path: Path) -> Path:
    folder = tmp_path / "screenshots"
    folder.mkdir(exist_ok=True)
    print(f"screenshots: {folder}")
    return folder


def test_a_write_shows_its_diff_and_is_approved_from_the_run_page(
    server: Server, browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    with server.client() as client:
        run_id = start(client, "writer", "fix the typo in notes.md", 1)
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        write = card(page, run_id, "write")
        diff = write.locator("pre.diff")
        expect(diff).to_contain_text("-The agent loop is drivn by a state machine.")
        assert "+<img src=x onerror=alert(1)> is now fixed." in diff.inner_text()  # as text
        assert diff.locator("img").count() == 0
        expect(write.locator(".request")).to_contain_text("fix the typo in notes.md")
        expect(write.locator(".description")).to_contain_text("Create or overwrite a text file")
        expect(write.locator(".meta").first).to_contain_text("writer")
        assert "\\n" not in write.locator(".arguments").inner_text()  # never escaped wire JSON
        page.screenshot(path=str(shots(tmp_path) / "inbox.png"), full_page=True)

        page.goto(f"{server.url}/ui/runs/{run_id}")
        pending = page.locator("#pending article")
        expect(pending).to_have_count(1)
        expect(pending.locator("pre.diff")).to_contain_text("-The agent loop is drivn")
        pending.get_by_role("button", name="Approve").click()
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")

        expect(page.locator("#status")).to_have_text("done")
        expect(page.locator("#pending-section")).to_be_hidden()
        turns = page.locator("#conversation > li")
        expect(turns.nth(0)).to_contain_text("fix the typo in notes.md")
        call = page.locator(".tool-call")
        expect(call.locator(".signature")).to_have_text(
            'write(path="notes.md", content="# Notes <img src=x onerror=alert(1)> is now fixed.")'
        )
        expect(call.locator(".result-side")).to_contain_text("overwrote notes.md")
        expect(call.locator(".decision")).to_have_text("approved by http")
        expect(page.locator("#answer")).to_contain_text("notes.md is fixed")
        expect(page.get_by_role("link", name="jump to the answer")).to_be_visible()
        assert '{"id"' not in page.locator("#conversation").inner_text()  # no wire JSON
        page.wait_for_selector("#diagram[data-current='done']", state="attached")
        page.screenshot(path=str(shots(tmp_path) / "run.png"), full_page=True)
        assert page.dialogs == []  # nothing the model wrote ever ran


def test_a_model_failed_run_is_in_the_failed_tab_and_retried_from_it(
    server: Server, browser_page: Any, model: ModelServer
) -> None:
    page = browser_page
    with server.client() as client:
        started = client.post("/api/agents/flaky/runs", json={"prompt": "hello"}, timeout=180)
        run_id = started.json()["run_id"]  # (its first run may wait for litellm's import)

        def failed() -> bool:
            """the run rests in model_failed"""
            return bool(client.get(f"/api/runs/{run_id}").json()["state"] == "model_failed")

        wait_for(failed, within=120)
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        page.get_by_role("tab", name="Failed").click()
        row = page.locator(f"#failed .run-row[data-run='{run_id}']")
        expect(row.locator(".reason")).to_contain_text("provider is unavailable (HTTP 503)")
        expect(page.locator("#count-failed")).not_to_have_text("")
        row.get_by_role("button", name="Retry the model call").click()
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
        run = client.get(f"/api/runs/{run_id}").json()
        assert run["output"] == "recovered after a retry"
        assert ["model_failed", "thinking", "retry", "http"] in [
            [t["from"], t["to"], t["event"], t["actor"]] for t in run["transitions"]
        ]
        expect(row).to_have_count(0)  # no longer failed: gone from the tab, live
        expect(page.locator(f"#done .run-row[data-run='{run_id}']")).to_have_count(1)
        again = client.post(f"/api/runs/{run_id}/retry", json={})
        assert again.status_code == 409
        assert "not model_failed" in again.json()["detail"]


def test_two_teams_each_see_and_decide_only_their_own(server: Server, browser_page: Any) -> None:
    with server.client(**{"X-User": "ann"}) as ann, server.client(**{"X-User": "bob"}) as bob, \
            server.client(**{"X-User": "vic"}) as vic:  # fmt: skip
        red, blue = start(ann, "agent", "pay red", 2), start(bob, "agent", "pay blue", 2)
        assert red in {r["run_id"] for r in ann.get("/api/runs").json()["items"]}
        assert blue not in {r["run_id"] for r in ann.get("/api/runs").json()["items"]}
        assert {a["run_id"] for a in ann.get("/api/approvals").json()["items"]} == {red}
        assert {a["run_id"] for a in bob.get("/api/approvals").json()["items"]} == {blue}
        for path in (
            f"/api/runs/{blue}",
            f"/api/runs/{blue}/events",
            f"/api/runs/{blue}/diagram.mmd",
        ):
            assert ann.get(path).status_code == 404, path
        item = bob.get("/api/approvals").json()["items"][0]
        refused = ann.post(f"/api/runs/{blue}/calls/{item['call_id']}/decision",
                           json={"decision": "approve", "digest": item["digest"]},
                           headers={"Idempotency-Key": "x"})  # fmt: skip
        assert refused.status_code == 404
        assert refused.json()["detail"] == f"no run {blue!r}"  # as for a run that is not there
        assert vic.get(f"/api/runs/{red}").status_code == 200  # a viewer reads,
        viewed = vic.post(f"/api/runs/{red}/abort", json={"reason": "no"})
        assert viewed.status_code == 403  # but does not act

        # SSE: ann's stream of every run carries her runs' entries and none of bob's
        bob.post(f"/api/runs/{blue}/abort", json={"reason": "blue is done"})
        ann.post(f"/api/runs/{red}/abort", json={"reason": "red is done"})

        def red_aborted(event: Any) -> bool:
            data = json.loads(event.data)
            return bool(data["run_id"] == red and data["status"] == "aborted")

        events = read_events(ann, "/api/events", 1000, last_event_id="0", until=red_aborted)
        seen = {json.loads(e.data)["run_id"] for e in events}
        assert red in seen
        assert blue not in seen

        # pages: cy's team sees its own card only, and decides it there
        with server.client(**{"X-User": "cy"}) as cy:
            cy_run = start(cy, "agent", "pay green", 2)
        page = browser_page
        page.context.add_cookies([{"name": "user", "value": "cy", "url": server.url}])
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        expect(page.locator("#cards article")).to_have_count(2)
        assert {
            page.locator("#cards article").nth(i).get_attribute("data-run") for i in range(2)
        } == {cy_run}
        card(page, cy_run, "charge").get_by_role("button", name="Approve").click()
        expect(page.locator("#cards article")).to_have_count(1)
        with server.client() as everyone:
            queued = everyone.get(f"/api/runs/{cy_run}").json()["queued"]
        assert [(q["decision"], q["actor"]) for q in queued] == [("approve", "cy")]
        page.goto(f"{server.url}/ui/runs/{blue}")
        expect(page.locator("#live")).to_have_text(f"no run {blue!r}")


def test_a_call_is_approved_with_the_keyboard_alone(server: Server, browser_page: Any) -> None:
    with server.client(**{"X-User": "cy"}) as cy:
        for item in cy.get("/api/approvals").json()["items"]:  # the team's earlier calls
            cy.post(f"/api/runs/{item['run_id']}/abort", json={"reason": "clear"})
        run_id = start(cy, "agent", "pay by keyboard", 2)
        page = browser_page
        page.context.add_cookies([{"name": "user", "value": "cy", "url": server.url}])
        page.goto(f"{server.url}/ui/?token={TOKEN}")
        charge = card(page, run_id, "charge")
        for label in ("Reason for charge", "Message to the model",
                      "Decide charge's later calls in this run alike"):  # fmt: skip
            expect(charge.get_by_label(label)).to_have_count(1)
        approve = charge.get_by_role("button", name="Approve")
        for _ in range(60):
            if approve.evaluate("node => node === document.activeElement"):
                break
            page.keyboard.press("Tab")
        assert approve.evaluate("node => node === document.activeElement")
        page.keyboard.press("Enter")
        wait_for(lambda: cy.get(f"/api/runs/{run_id}").json()["queued"])
        [queued] = cy.get(f"/api/runs/{run_id}").json()["queued"]
        assert (queued["decision"], queued["actor"]) == ("approve", "cy")
        expect(charge).to_have_count(0)


def test_the_small_things_lead_a_browser_to_the_inbox(server: Server, browser_page: Any) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as anonymous:
        home = anonymous.get("/")
        assert (home.status_code, home.headers["location"]) == (307, "/ui/")
        icon = anonymous.get("/ui/static/favicon.svg")
        assert icon.headers["content-type"] == "image/svg+xml"
        assert anonymous.get("/favicon.ico", follow_redirects=True).content == icon.content
    page = browser_page
    response = page.goto(f"{server.url}/")  # no token yet: a page that says how to log in
    assert response.status == 401
    assert page.url == f"{server.url}/ui/"
    expect(page.locator("#login")).to_contain_text("?token=")
    page.goto(f"{server.url}/ui/?token={TOKEN}")
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()


def test_a_viewer_sees_the_calls_without_controls_to_decide(
    server: Server, browser_page: Any
) -> None:
    with server.client(**{"X-User": "ann"}) as ann, server.client(**{"X-User": "vic"}) as vic:
        run_id = start(ann, "agent", "pay, viewed", 2)
        assert vic.get("/api/me").json() == {
            "name": "vic", "tenant": "red", "roles": ["viewer"], "may_act": False
        }  # fmt: skip
    page = browser_page
    page.context.add_cookies([{"name": "user", "value": "vic", "url": server.url}])
    page.goto(f"{server.url}/ui/runs/{run_id}?token={TOKEN}")
    charge = page.locator("#pending article", has=page.locator("h3:text-is('charge')"))
    expect(charge.locator(".viewer")).to_have_text("vic may view this call, not decide it")
    expect(charge.get_by_role("button", name="Approve")).to_be_disabled()
