"""Pages of `/api/runs` and `/api/approvals` by cursor, over real HTTP: runs started and calls
decided between page reads neither repeat an item nor leave one out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from service_support import serving
from test_service_api import decide, problem, start_run

Items = list[dict[str, Any]]


def pages(
    client: httpx.Client, path: str, between: Callable[[Items], None], **params: Any
) -> Items:
    """Every item of `path`, a page at a time; `between(items so far)` after each page."""
    items: Items = []
    cursor = None
    for _ in range(50):
        page = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        items.extend(page.json()["items"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return items
        between(items)
    raise AssertionError("more than 50 pages")


def test_pages_hold_every_item_once_while_runs_start_and_change(tmp_path: Path) -> None:
    with serving(tmp_path) as server, server.client() as client:
        started = [start_run(client) for _ in range(5)]
        everything = client.get("/api/runs", params={"limit": 500}).json()
        assert everything["next_cursor"] is None
        runs = [r["run_id"] for r in everything["items"]]
        assert runs == [run_id for run_id, _ in reversed(started)]  # newest first
        inbox = client.get("/api/approvals", params={"limit": 500}).json()["items"]
        assert len(inbox) == 10
        decided: list[str] = []

        def start_and_decide(target: dict[str, Any]) -> None:
            start_run(client)  # newer than every run listed: before the cursor
            if not decided:  # a change to a listed run (its updated_at moves)
                assert decide(client, target, "k").status_code == 200
                decided.append(target["call_id"])

        oldest_charge = started[0][1][0]
        listed = pages(client, "/api/runs", lambda _: start_and_decide(oldest_charge), limit=2)
        assert [r["run_id"] for r in listed] == runs

        decided.clear()
        inbox = client.get("/api/approvals", params={"limit": 500}).json()["items"]
        shown = pages(client, "/api/approvals", lambda seen: start_and_decide(seen[0]), limit=3)
        assert [(i["run_id"], i["call_id"]) for i in shown] == [
            (i["run_id"], i["call_id"]) for i in inbox
        ]
        assert decided == [inbox[0]["call_id"]]

        problem(client.get("/api/runs", params={"cursor": "not-a-cursor"}), 400)
        runs_cursor = client.get("/api/runs", params={"limit": 1}).json()["next_cursor"]
        problem(client.get("/api/approvals", params={"cursor": runs_cursor}), 400)
