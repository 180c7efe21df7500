"""Pages of `GET /api/runs` and `GET /api/approvals` by opaque cursor.

Runs are listed newest created first (ties by run id), and a page's `next_cursor` names the
last run it holds: the next page is read from the store strictly after it (`list_runs(
cursor=)`), so runs created meanwhile (newer: before the cursor) and runs that change
meanwhile (`created_at` never does) neither repeat nor shift a run out of the pages. The
approvals follow the same order of runs, each run's pending calls in their batch's order;
their cursor also names the last call given. A run that cannot be read is passed over and
named in the page's `damaged` list (its id and problem).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

from loopstate.engine.errors import RunDamaged, RunNotFound
from loopstate.engine.state import RunState
from loopstate.engine.store import Cursor, RunSummary, Store
from loopstate.service.problems import Problem
from loopstate.service.views import approvals_of, summary_view

MAX_LIMIT = 500
MAX_CURSOR = 2048
"""Longest cursor read (what this API hands out is far shorter: a time and two ids)."""
CHUNK = 50
"""Runs read at once while filling a page of approvals."""


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise Problem(400, f"limit must be between 1 and {MAX_LIMIT}")
    return limit


Keep = Callable[[str], Awaitable[bool]]
"""Whether the asker may see run `run_id` (see `tenancy`): others are left out of pages."""


async def _everyone(run_id: str) -> bool:
    return True


async def runs_page(
    store: Store, status: str | None, limit: int, cursor: str | None, keep: Keep = _everyone
) -> Page:
    after = _decode(cursor, "runs")
    position = None if after is None else _at(after)
    runs: list[RunSummary] = []
    while len(runs) <= limit:
        chunk = await store.list_runs(status=status, limit=limit + 1, by="created", cursor=position)
        runs.extend([s for s in chunk if await keep(s.run_id)])
        if len(chunk) <= limit:
            break
        position = (chunk[-1].created_at, chunk[-1].run_id)
    more, shown = len(runs) > limit, runs[:limit]
    last = shown[-1] if shown else None
    following = _encode(["runs", last.created_at, last.run_id]) if more and last else None
    return {"items": [summary_view(s) for s in shown], "next_cursor": following}


Page = dict[str, Any]


async def approvals_page(
    store: Store,
    run_id: str | None,
    tool: str | None,
    limit: int,
    cursor: str | None,
    *,
    keep: Keep = _everyone,
    assignee: str | None = None,
) -> Page:
    """Up to `limit` pending calls (of run `run_id` only, of tool `tool` only, assigned to
    `assignee` only, of runs `keep` keeps) after `cursor`."""
    after = _decode(cursor, "approvals")
    found = _Found(tool, assignee, keep)
    if after is not None:  # first the rest of the run the last page ended in
        state = await found.loaded(store, str(after[1]))
        if state is not None and run_id in (None, state.run_id):
            found.take(state, after_call=str(after[2]))
    if run_id is None:
        await found.waiting(store, None if after is None else _at(after), limit)
    elif after is None:
        state = await found.loaded(store, run_id)
        if run_id in found.damaged:
            raise Problem(409, f"run {run_id} is damaged: {found.damaged[run_id]}")
        if state is None:
            raise Problem(404, f"no run {run_id!r}")
        found.take(state)
    return found.page(limit)


class _Found:
    """The pending calls gathered for a page, each with its run; and the runs passed over
    because they cannot be read (`damaged`: run id → problem), named on the page."""

    def __init__(self, tool: str | None, assignee: str | None, keep: Keep) -> None:
        self.tool = tool
        self.assignee = assignee
        self.keep = keep
        self.items: list[tuple[RunState, dict[str, Any]]] = []
        self.damaged: dict[str, str] = {}

    def take(self, state: RunState, *, after_call: str | None = None) -> None:
        items = [
            a
            for a in approvals_of(state)
            if self.tool in (None, a["tool"]) and self.assignee in (None, a["assignee"])
        ]
        if after_call is not None:  # calls keep their place in `calls`: resume after it
            ids = [c.call_id for c in state.calls]
            since = ids.index(after_call) if after_call in ids else -1
            items = [a for a in items if ids.index(a["call_id"]) > since]
        self.items.extend((state, a) for a in items)

    async def waiting(self, store: Store, position: Cursor | None, limit: int) -> None:
        """Runs awaiting approval after `position`, until the page is full (and one more)."""
        while len(self.items) <= limit:
            runs = await store.list_runs(
                status="awaiting_approval", limit=CHUNK, by="created", cursor=position
            )
            for summary in runs:
                if not await self.keep(summary.run_id):
                    continue
                if summary.problem is not None:
                    self.damaged[summary.run_id] = summary.problem
                elif (state := await self.loaded(store, summary.run_id)) is not None:
                    self.take(state)
            if len(runs) < CHUNK:
                return
            position = (runs[-1].created_at, runs[-1].run_id)

    def page(self, limit: int) -> Page:
        """The page, with each item's run (for `explain`) under the key `states`."""
        shown = self.items[:limit]
        following = None
        if len(self.items) > limit:
            state, item = shown[-1]
            following = _encode(["approvals", state.created_at, state.run_id, item["call_id"]])
        damaged = [{"run_id": r, "problem": p} for r, p in self.damaged.items()]
        return {"items": [item for _, item in shown], "next_cursor": following,
                "damaged": damaged, "states": [state for state, _ in shown]}  # fmt: skip

    async def loaded(self, store: Store, run_id: str) -> RunState | None:
        """The run, or None if it is gone or damaged (then named in `damaged`)."""
        if not await self.keep(run_id):
            return None
        try:
            return await store.load(run_id)
        except RunNotFound:
            return None  # gone since it was listed
        except RunDamaged as exc:  # the others' calls are still shown
            self.damaged[run_id] = (str(exc).splitlines() or ["damaged"])[0]
            return None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _at(after: list[Any]) -> Cursor:
    return float(after[0]), str(after[1])


def _encode(fields: list[Any]) -> str:
    text = json.dumps(fields, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode(cursor: str | None, kind: str) -> list[Any] | None:
    """The cursor's fields after its kind; 400 for anything this API did not hand out."""
    if not cursor:
        return None
    fields = None
    if len(cursor) <= MAX_CURSOR and cursor.isascii():  # bounded before it is decoded
        try:
            fields = json.loads(
                base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)),
                parse_constant=_no_constant,
            )
        except (ValueError, UnicodeDecodeError, RecursionError):
            fields = None
    size = 3 if kind == "runs" else 4
    if (
        isinstance(fields, list)
        and len(fields) == size
        and fields[0] == kind
        and isinstance(fields[1], int | float)
        and not isinstance(fields[1], bool)
        and abs(fields[1]) < 1e15  # a time this API handed out; never a 4,000-digit number
        and all(isinstance(f, str) and f.isprintable() for f in fields[2:])
    ):
        return fields[1:]
    raise Problem(400, "invalid cursor: pass back a next_cursor this API returned")
