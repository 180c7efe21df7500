"""Cassettes: a run recorded as JSON lines — model turns, tool results, decisions, transitions.

    {"kind": "header", "format": "loopstate-cassette", "version": 1, ...}
    {"kind": "model", "step": 1, "digest": "…", "request": {...}, "response": {...}}
    {"kind": "decision", "call_id": "…", "tool": "…", "decision": {...}, "actor": "…"}
    {"kind": "tool", "call_id": "…", "tool": "…", "arguments": {...}, "status": "…", "result": "…"}
    {"kind": "transition", "seq": 1, "source": "idle", "target": "thinking", "event": "start", ...}
    {"kind": "outcome", "status": "done", "output": "…", "stop_reason": "answer"}

One record per line with sorted keys, so a cassette reads well in a diff. No secrets: only
the request the model port sees (messages, tool schemas, tool_choice) and settings whose
names do not look like keys, tokens or headers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopstate.engine.errors import LoopstateError
from loopstate.engine.messages import to_wire
from loopstate.engine.model import ModelRequest

FORMAT = "loopstate-cassette"
VERSION = 1
_SECRET = re.compile(r"key|token|secret|password|auth|header|cookie|credential", re.I)


class CassetteError(LoopstateError):
    """A cassette file is missing, unreadable, or from a newer loopstate."""


def request_record(request: ModelRequest) -> dict[str, Any]:
    """The part of a request that replay compares: what the model was shown."""
    return {
        "messages": [to_wire(m) for m in request.messages],
        "tools": [d.model_dump(mode="json") for d in request.tools],
        "tool_choice": request.tool_choice,
    }


def digest(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def safe_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings worth recording: never anything that looks like a credential, and URLs
    without any user:password part."""
    return {
        k: re.sub(r"//[^/@\s]*@", "//", v) if isinstance(v, str) else v
        for k, v in sorted(settings.items())
        if not _SECRET.search(k) and isinstance(v, str | int | float | bool | type(None))
    }


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


@dataclass
class Cassette:
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CassetteError(f"cannot read cassette {path}: {exc}") from None
        return cls.parse(lines, str(path))

    @classmethod
    def parse(cls, lines: Iterable[str], name: str = "cassette") -> Cassette:
        records = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CassetteError(f"{name} line {number}: not JSON ({exc.msg})") from None
        if not records or records[0].get("kind") != "header":
            raise CassetteError(f"{name} has no header line: not a loopstate cassette")
        header = records[0]
        if header.get("format") != FORMAT or header.get("version", 0) > VERSION:
            raise CassetteError(
                f"{name} is format {header.get('format')} version {header.get('version')}; "
                f"this loopstate reads {FORMAT} up to version {VERSION}"
            )
        return cls(header, records[1:])

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def model_turns(self) -> dict[int, dict[str, Any]]:
        """The last recorded turn of each step (a step repeated after a crash keeps its last)."""
        return {r["step"]: r for r in self.of_kind("model")}

    def tool_results(self) -> dict[str, dict[str, Any]]:
        return {r["call_id"]: r for r in self.of_kind("tool")}

    def decisions(self) -> dict[str, dict[str, Any]]:
        return {r["call_id"]: r for r in self.of_kind("decision")}

    def outcome(self) -> dict[str, Any] | None:
        outcomes = self.of_kind("outcome")
        return outcomes[-1] if outcomes else None
