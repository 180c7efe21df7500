"""`loopstate runs list` and `runs show` as a person reads them: a table, and a run's
conversation and tool calls; `--json` gives the full data. Model-chosen text is escaped."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from typing import Any

from loopstate.cli.text import shown, shown_json
from loopstate.engine.failure import RunFailure
from loopstate.engine.messages import AssistantMessage, Message, ToolMessage, UserMessage
from loopstate.engine.state import Redefinition, RunState
from loopstate.engine.store import RunSummary

SHORT_ID = 8
_HEADER = ("RUN", "AGE", "STATUS", "PENDING", "STEPS", "PROMPT")


def short_ids(run_ids: Sequence[str]) -> dict[str, str]:
    """Each id cut to the shortest prefix of at least `SHORT_ID` characters that no other
    id shares (the CLI accepts any unique prefix)."""
    shorts = {}
    for run_id in run_ids:
        n = min(SHORT_ID, len(run_id))
        while n < len(run_id) and any(o != run_id and o.startswith(run_id[:n]) for o in run_ids):
            n += 1
        shorts[run_id] = run_id[:n]
    return shorts


def ago(then: float, now: float | None = None) -> str:
    """`then` as an age: `12s`, `5m`, `3h`, `2d`."""
    seconds = max(0.0, (time.time() if now is None else now) - then)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def prompt_of(state: RunState) -> str:
    """The run's opening user message ('' if it has none)."""
    return next((m.content for m in state.messages if isinstance(m, UserMessage)), "")


def table(states: Sequence[RunState | RunSummary], *, width: int | None = None) -> list[str]:
    """The lines of `runs list`: a header, then one line per run (a damaged run, listed but
    not readable: `damaged` and its problem in place of the prompt)."""
    shorts = short_ids([s.run_id for s in states])
    rows = [
        (shorts[s.run_id], ago(s.updated_at), s.status, str(len(s.pending)) if s.pending else "-",
         str(s.steps), _one_line(prompt_of(s)))
        if isinstance(s, RunState)
        else (shorts[s.run_id], ago(s.updated_at), s.status, "-", "-", _one_line(s.problem or ""))
        for s in states
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in [_HEADER, *rows]) for i in range(len(_HEADER) - 1)]
    room = (width or shutil.get_terminal_size((100, 24)).columns) - sum(widths) - 2 * len(widths)
    return [
        shown("  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)),
                         _cut(r[-1], room)]))
        for r in [_HEADER, *rows]
    ]  # fmt: skip


def show_lines(state: RunState, *, pending: bool = True) -> list[str]:
    """The lines of `runs show`: what the run is, its conversation, transitions, what waits
    (unless `pending` is False: a run with sub-agents lists its whole tree's instead)."""
    lines = [
        f"run {state.run_id} ({state.machine}): {state.status}, {state.steps} steps, "
        f"started {ago(state.created_at)} ago, updated {ago(state.updated_at)} ago",
    ]
    lines += _forked_from(state)
    lines += [_redefined(r) for r in state.redefinitions]
    if state.stop_reason:
        lines.append(f"stop reason: {state.stop_reason}")
    if state.error:
        lines.append(f"error: {state.error}")
    lines += next_step(state.run_id, state.state, failure=state.failure)
    u = state.usage
    if u.prompt_tokens or u.completion_tokens:
        cost = f", ${u.cost_usd:.4f}" if u.cost_usd is not None else ""
        lines.append(f"usage: {u.prompt_tokens} tokens in, {u.completion_tokens} out{cost}")
    lines += [
        "",
        "conversation:",
        *(line for m in state.messages for line in message_lines(m)),
        "",
        "transitions:",
    ]
    for t in state.transitions:
        who = f" by {t.actor}" if t.actor else ""
        why = f": {t.reason}" if t.reason else ""
        lines.append(f"  {t.seq:>3}  {t.source} → {t.target}  [{t.event}{who}{why}]")
        if state.forked_from is not None and t.seq == state.forked_from.seq:
            lines.append(f"       (above: copied from run {state.forked_from.run_id})")
    lines += _pending(state) if pending else []
    return [shown(line) for line in lines]


_GO_ON = {
    "model_failed": ("the model call failed in a way that may pass; call it again", ""),
    "budget_exceeded": ("the run is over its budget; raise the limit", " --budget LIMIT=VALUE"),
    "paused": ("the run is paused; go on", ""),
}
"""The states a run rests in, `failed` or `paused`, that `resume` continues (not final)."""


_FIX = "the model call was refused for the set-up (API key, model name); fix it, then call it again"


def next_step(
    run_id: str, state: str, agent: str = "MODULE:ATTR", failure: RunFailure | None = None
) -> list[str]:
    """How to continue a run resting in a state `resume` continues (none for another)."""
    if state not in _GO_ON:
        return []
    why, option = _GO_ON[state]
    if state == "model_failed" and failure is not None and failure.fixable:
        why = _FIX
    return [f"{why} with: loopstate resume {run_id} --agent {agent}{option}"]


def wants_message(state: RunState, agent: str) -> str | None:
    """Why `loopstate resume` without `--message` cannot continue `state`, with the command
    that does (a run that answered, a flow waiting for the user), or None."""
    again = f"loopstate resume {state.run_id} --agent {agent} --message TEXT"
    if state.status == "awaiting_input":
        return f"run {state.run_id} waits for the user's message: {again}"
    if state.flow is None and state.state == "done":
        return f"run {state.run_id} has answered; continue the conversation with: {again}"
    return None


def _redefined(record: Redefinition) -> str:
    """A resume under another definition, in one line (`loopstate.engine.pinning`)."""
    how = f"migrated by {record.migration}" if record.migration else "resumed"
    changes = "; ".join(record.changes) or "no change that matters to the run"
    return f"{how} under definition {record.after} (was {record.before or 'unknown'}): {changes}"


def _forked_from(state: RunState) -> list[str]:
    fork = state.forked_from
    if fork is None:
        return []
    edits = "; ".join(fork.edits())
    return [
        f"forked from run {fork.run_id} at transition {fork.seq} by {fork.by}"
        + (f": {edits}" if edits else "")
    ]


def show_json(state: RunState) -> str:
    """The whole stored run, as JSON, with its derived status and pending calls."""
    data: dict[str, Any] = state.model_dump(mode="json")
    data["status"] = state.status
    data["pending"] = [p.model_dump(mode="json") for p in state.pending]
    return json.dumps(data, indent=2, ensure_ascii=False)


def _pending(state: RunState) -> list[str]:
    if not state.pending:
        return []
    queued = {q.call_id: q.decision.kind for q in state.inbox}
    lines = ["", "waiting for a decision:"]
    for p in state.pending:
        mark = f"  ({queued[p.call_id]} queued, applies at resume)" if p.call_id in queued else ""
        lines.append(f"  {p.call_id}  {p.tool} {shown_json(p.arguments)}{mark}")
        if p.metadata.get("mcp") or p.external:  # an MCP tool's annotations, or a question
            lines.append(f"      {shown(p.reason)}")
    lines.append(f"decide with: loopstate approve {state.run_id} CALL (or deny/edit; --all)")
    return lines


def message_lines(message: Message) -> list[str]:
    """One line per text and per tool call, the role first."""
    if isinstance(message, AssistantMessage):
        calls = [f"→ {c.id} {c.function.name}({_cut(c.function.arguments, 200)})"
                 for c in message.calls]  # fmt: skip
        text = [_cut(_one_line(message.content), 300)] if message.content else []
        parts = [*text, *calls] or ["(no text)"]
        return [f"  {'assistant' if i == 0 else '':<9}  {part}" for i, part in enumerate(parts)]
    if isinstance(message, ToolMessage):
        content = _cut(_one_line(message.content), 300)
        return [f"  {'tool':<9}  {message.tool_call_id} ← {content}"]
    return [f"  {message.role:<9}  {_cut(_one_line(message.content), 300)}"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    limit = max(limit, 10)
    return text if len(text) <= limit else text[: limit - 1] + "…"
