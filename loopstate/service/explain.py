"""What a person needs beside a pending call to decide it well: which agent asks, the
request that started the run, the tool's description, and for the built-in file tools the
diff approving would make (see `previews`). Added to the approvals the API lists and to a
run's `pending`; every value is data, shown by the pages as text."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loopstate.engine.errors import LoopstateError
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.service.previews import preview

if TYPE_CHECKING:
    from loopstate.service.runner import Runner


def first_request(state: RunState) -> str | None:
    """The run's first user message: what was asked of it."""
    for message in state.messages:
        if message.role == "user" and isinstance(message.content, str):
            return message.content
    return None


def _explained(runner: Runner, state: RunState, item: dict[str, Any]) -> dict[str, Any]:
    found = runner.agent_of(state.run_id)
    name, agent = found if found is not None else (state.run_id.partition(".")[0], None)
    tools = getattr(agent, "tools", None)
    tool = None if tools is None else tools.get(item["tool"])
    workspace = None if agent is None else agent.options.workspace
    diff = None if tool is None else preview(tool, workspace, item["arguments"])
    return {**item, "agent": name, "request": first_request(state),
            "description": None if tool is None else tool.description, "diff": diff}  # fmt: skip


async def explain(
    runner: Runner, items: Sequence[tuple[RunState, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Each pending call with its agent, request, tool description and diff (files are read
    in a thread: never on the event loop)."""

    def work() -> list[dict[str, Any]]:
        return [_explained(runner, state, item) for state, item in items]

    return await asyncio.to_thread(work)


_STATUS_WORDS = {429: "is rate-limiting this key", 529: "is overloaded", 401: "refused the key",
                 403: "refused the request", 400: "refused the request as invalid"}  # fmt: skip


def failure_text(state: RunState) -> str | None:
    """Why the run failed, in plain words (the error itself stays in `error`)."""
    failure = state.failure
    if failure is None or failure.status is None:
        return state.error
    words = _STATUS_WORDS.get(failure.status)
    if words is None:
        words = "is unavailable" if failure.status >= 500 else "refused the call"
    said = f": {failure.provider_message}" if failure.provider_message else ""
    return f"the model's provider {words} (HTTP {failure.status}){said}"


async def with_errors(store: Store, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Listed runs, a failed one with its `error` and `failure_text` (what the inbox's
    failed tab shows beside it)."""
    shown = []
    for item in items:
        if item.get("status") == "failed":
            with contextlib.suppress(LoopstateError):  # gone or damaged since: as listed
                state = await store.load(item["run_id"])
                item = {**item, "error": state.error, "failure_text": failure_text(state)}
        shown.append(item)
    return shown
