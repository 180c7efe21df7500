"""Whether an agent can continue a stored run: it has every tool the run's unfinished calls
need and the instructions the run started with. Checked before anything changes, so resuming
with the wrong agent is refused instead of failing the run for good."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from loopstate.engine.errors import RunNotResumable
from loopstate.engine.messages import SystemMessage
from loopstate.engine.state import RunState
from loopstate.engine.tool import Tool

UNFINISHED = ("awaiting", "approved", "running", "interrupted")
"""Call statuses whose tool still has to run (or be decided) when the run resumes."""


def check_tools(state: RunState, tools: Iterable[str], *, who: str = "this agent") -> None:
    """`RunNotResumable` naming the tools the run needs that `tools` lacks."""
    needed = {c.tool for c in state.batch if c.status in UNFINISHED}
    missing = sorted(needed - set(tools))
    if missing:
        raise RunNotResumable(
            f"run {state.run_id} needs the tools {', '.join(sorted(needed))} for its pending "
            f"calls and {who} lacks {', '.join(missing)}; resume it with the agent that "
            "started it (nothing was changed)"
        )


def check_schemas(state: RunState, tools: Mapping[str, Tool]) -> None:
    """`RunNotResumable` naming the pending calls whose tool's schema is not the one they were
    asked under (an MCP server's tool may change between processes)."""
    changed = sorted(
        c.tool
        for c in state.batch
        if c.status == "awaiting"
        and c.parameters is not None
        and c.tool in tools
        and tools[c.tool].definition.parameters != c.parameters
    )
    if changed:
        raise RunNotResumable(
            f"run {state.run_id} has calls of {', '.join(changed)} waiting under another schema "
            "than the tool has now; decide them with the tool they were asked for, or abort "
            "the run (nothing was changed)"
        )


def check_instructions(state: RunState, instructions: str | None) -> None:
    """`RunNotResumable` if the run started with other instructions than `instructions`
    (an agent without instructions fits any run: its prompt may have brought its own)."""
    if instructions is None:
        return
    first = state.messages[0] if state.messages else None
    stored = first.content if isinstance(first, SystemMessage) else None
    if stored != instructions:
        raise RunNotResumable(
            f"run {state.run_id} started with other instructions ({_quote(stored)}) than this "
            f"agent's ({_quote(instructions)}); resume it with the agent that started it "
            "(nothing was changed)"
        )


def _quote(text: str | None, limit: int = 40) -> str:
    if not text:
        return "none"
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
