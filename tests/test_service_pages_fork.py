"""The run page's fork action in a real Chromium: "fork here" on a transition opens the fork,
which names where it came from and waits for the decisions again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_support import TOKEN, serving, wait_for
from test_service_pages import browser, browser_page, decide_all, start_run

pytestmark = pytest.mark.slow
__all__ = ["browser", "browser_page"]  # the fixtures, shared


def test_fork_here_on_a_transition_opens_a_fork_that_waits_again(
    browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    with serving(tmp_path) as server, server.client() as client:
        run_id = start_run(client)
        decide_all(client, run_id)
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["status"] == "done")
        page.goto(f"{server.url}/ui/runs/{run_id}?token={TOKEN}")
        page.wait_for_selector("#diagram[data-current='done']", state="attached")
        assert page.locator("#forked").is_hidden()

        page.locator("#transitions tr").nth(1).get_by_role("button", name="fork here").click()
        page.wait_for_url(lambda url: run_id not in url)
        fork_id = page.url.rsplit("/", 1)[-1]
        page.wait_for_selector("#diagram[data-current='awaiting_approval']", state="attached")
        assert (
            page.locator("#forked")
            .inner_text()
            .startswith(f"forked from run {run_id} at transition 2")
        )
        assert page.locator("#transitions tr.inherited").count() == 2
        fork = client.get(f"/api/runs/{fork_id}").json()
        assert fork["forked_from"]["run_id"] == run_id
        assert len(fork["pending"]) == 2
        assert page.dialogs == []
