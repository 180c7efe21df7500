"""`Recorder`: a hook that appends a run to a cassette as it happens.

Each record is appended and flushed at once, so a run that suspends in one process and
resumes in another is recorded whole when both use a Recorder on the same file: a new run
starts the file afresh, a resumed one appends to it. Put it last among a run's hooks: it
records tool results as the model will see them. One Recorder records one run at a time.

Why a hook and not an export from the store: the store keeps the history, not what each
request showed the model (the active tools, `tool_choice`, a flow phase's view), and the
digest must be of exactly that request; the hook sees it as it is sent.

Credentials never reach the file: settings are filtered by name (`safe_settings`), and the
values of the model's credential settings and of credential-named environment variables are
replaced by `[REDACTED]` in every line, wherever they turn up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loopstate.engine.events import Event
from loopstate.engine.hooks import Hooks
from loopstate.engine.messages import to_wire
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.recording.cassette import (
    FORMAT,
    VERSION,
    Digester,
    child_cassette,
    dumps,
    safe_settings,
    scrubber,
    secret_values,
)
from loopstate.engine.state import CallRecord, RunState, Transition


class Recorder(Hooks):
    """A hook that records a run to a cassette at `path` (JSON lines): each model turn,
    decision, tool result and transition, and the outcome; never API keys or headers.
    `replay(path, agent)` plays it back offline. `model` names the model for the record
    when it is not the agent's (e.g. a scripted model under a recording)."""

    def __init__(self, path: str | Path, *, model: Any = None) -> None:
        self.path = Path(path)
        self._model = model
        settings = getattr(model, "settings", None)
        self._settings: dict[str, Any] = settings if isinstance(settings, dict) else {}
        self._scrub = scrubber(secret_values(self._settings, os.environ))
        self._reset()

    def for_child(self, call_id: str, model: Any = None) -> Recorder:
        """A recorder for the child run that call `call_id` delegated to (a sub-agent), at
        `child_cassette(self.path, call_id)`: replay finds it there."""
        return Recorder(child_cassette(self.path, call_id), model=model)

    def _reset(self) -> None:
        self._digester = Digester(self._scrub)
        self._written = 0  # messages of the history already in this file, from this run
        self._tools: Any = None

    def _write(self, record: dict[str, Any], *, fresh: bool = False) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = fresh or not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("w" if fresh else "a", encoding="utf-8") as f:
            if fresh:
                f.write(self._scrub(dumps(self._header())) + "\n")
            f.write(self._scrub(dumps(record)) + "\n")

    def _header(self) -> dict[str, Any]:
        return {
            "kind": "header",
            "format": FORMAT,
            "version": VERSION,
            "model": getattr(self._model, "name", None),
            "settings": safe_settings(self._settings),
        }

    async def on_run_start(self, run: RunState) -> None:
        self._reset()
        self._write({"kind": "run", "run_id": run.run_id, "machine": run.machine,
                     "state": run.state}, fresh=not run.transitions)  # fmt: skip

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> None:
        first = min(self._written, len(request.messages))
        record: dict[str, Any] = {
            "kind": "model",
            "step": request.step,
            "digest": self._digester.digest(request),
            "first": first,
            "messages": [to_wire(m) for m in request.messages[first:]],
            "tool_choice": request.tool_choice,
            "response": response.model_dump(mode="json", exclude_none=True),
        }
        if request.tools is not self._tools:
            record["tools"] = [d.model_dump(mode="json") for d in request.tools]
            self._tools = request.tools
        self._write(record)
        self._written = len(request.messages)

    async def on_approval_decided(self, call: CallRecord) -> None:
        assert call.decision is not None
        self._write(
            {
                "kind": "decision",
                "call_id": call.call_id,
                "tool": call.tool,
                "arguments": call.arguments,
                "decision": call.decision.model_dump(mode="json", exclude_none=True),
                "actor": call.decided_by,
            }
        )

    async def on_event(self, event: Event) -> None:
        if event.kind == "tool_approval" and event.outcome == "auto":
            self._write({"kind": "decision", "call_id": event.call_id, "tool": event.tool,
                         "decision": {"kind": "auto"}, "actor": event.actor})  # fmt: skip

    async def after_tool(self, call: CallRecord, result: str) -> str | None:
        self._write(
            {
                "kind": "tool",
                "call_id": call.call_id,
                "tool": call.tool,
                "arguments": call.executed_arguments,
                "status": call.status,
                "result": result,
            }
        )
        return None

    async def on_transition(self, transition: Transition) -> None:
        self._write({"kind": "transition", **transition.model_dump(mode="json", exclude_none=True)})

    async def on_run_end(self, run: RunState) -> None:
        self._write({"kind": "outcome", "status": run.status, "output": run.output,
                     "stop_reason": run.stop_reason, "error": run.error})  # fmt: skip
