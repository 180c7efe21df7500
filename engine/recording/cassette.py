"""Cassettes: a run recorded as JSON lines — model turns, tool results, decisions, transitions.

    {"kind": "header", "format": "loopstate-cassette", "version": 1, ...}
    {"kind": "model", "step": 1, "digest": "…", "first": 0, "messages": [...], "tools": [...],
     "tool_choice": "auto", "response": {...}}
    {"kind": "decision", "call_id": "…", "tool": "…", "decision": {...}, "actor": "…"}
    {"kind": "tool", "call_id": "…", "tool": "…", "arguments": {...}, "status": "…", "result": "…"}
    {"kind": "transition", "seq": 1, "source": "idle", "target": "thinking", "event": "start", ...}
    {"kind": "outcome", "status": "done", "output": "…", "stop_reason": "answer"}

One record per line with sorted keys, so a cassette reads well in a diff. No secrets: only
the request the model port sees (messages, tool schemas, tool_choice) and settings whose
names do not look like keys, tokens or headers.

A model record holds only what is new in its request: the messages from index `first` on
(the history before them is the previous request's), and the tools when they changed; so a
cassette grows with the run, not with the square of it. The digest chains per-message hashes,
so checking a request costs only its new messages.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopstate.engine.errors import CassetteError
from loopstate.engine.messages import to_wire
from loopstate.engine.model import ModelRequest
from loopstate.engine.recording.cassette_records import checked

__all__ = ["Cassette", "CassetteError", "Digester"]

FORMAT = "loopstate-cassette"
VERSION = 1
# Names of settings that hold credentials; token *counts* (max_tokens, ...) are not secrets.
_SECRET = re.compile(
    r"key|secret|passw|auth|header|cookie|credential|signature|(?<!max_)(?<!completion_)token",
    re.I,
)
# Environment variables are matched by whole name parts: GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY,
# SSH_AUTH_SOCK, but not GIT_AUTHOR_NAME or TOKENIZERS_PARALLELISM.
_SECRET_ENV = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)(_|$)", re.I
)
_URL_USER = re.compile(r"//[^/@\s]*@")
_URL_SECRET = re.compile(r"([?&][^=&#]*(?:key|token|secret|sig|passw|auth)[^=&#]*=)[^&#]*", re.I)


def request_record(request: ModelRequest) -> dict[str, Any]:
    """The part of a request that replay compares: what the model was shown."""
    return {
        "messages": [to_wire(m) for m in request.messages],
        "tools": [d.model_dump(mode="json") for d in request.tools],
        "tool_choice": request.tool_choice,
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _hash(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()


def _link(previous: str, item: str) -> str:
    return hashlib.sha256(f"{previous}{item}".encode()).hexdigest()


def digest_of(record: dict[str, Any]) -> str:
    """The digest of a full request record (what `Digester.digest` computes incrementally)."""
    chain = _hash([record["tools"], record["tool_choice"]])
    for message in record["messages"]:
        chain = _link(chain, _hash(message))
    return chain[:16]


class Digester:
    """Digests the requests of one run incrementally: histories only grow, and a message
    object seen in the previous request is not serialized or hashed again. Messages are
    hashed as the cassette stores them, after `scrub` (so a redacted cassette still replays)."""

    def __init__(self, scrub: Callable[[str], str] | None = None) -> None:
        self._scrub = scrub
        self._tools: tuple[Any, str, str] | None = None  # (tools object, choice, chain head)
        self._chain: list[tuple[Any, str]] = []  # (message object, chain through it)

    def digest(self, request: ModelRequest) -> str:
        head = self._head(request)
        chain, same = head, 0
        for i, message in enumerate(request.messages):
            if i < len(self._chain) and self._chain[i][0] is message:
                chain, same = self._chain[i][1], i + 1
                continue
            break
        del self._chain[same:]
        for message in request.messages[same:]:
            text = _canonical(to_wire(message))
            if self._scrub is not None:
                text = self._scrub(text)
            chain = _link(chain, hashlib.sha256(text.encode()).hexdigest())
            self._chain.append((message, chain))
        return chain[:16]

    def _head(self, request: ModelRequest) -> str:
        cached = self._tools
        if cached is None or cached[0] is not request.tools or cached[1] != request.tool_choice:
            tools = [d.model_dump(mode="json") for d in request.tools]
            head = _hash([tools, request.tool_choice])
            self._chain.clear()
            self._tools = cached = (request.tools, request.tool_choice, head)
        return cached[2]


def safe_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings worth recording: plain values whose names do not look like credentials
    (`max_tokens` stays, `api_key`, `extra_headers`, `aws_session_token` go), and URLs
    without a user:password part or a key-like query parameter's value."""
    return {
        k: _redact_url(v) if isinstance(v, str) else v
        for k, v in sorted(settings.items())
        if not _SECRET.search(k) and isinstance(v, str | int | float | bool | type(None))
    }


def _redact_url(value: str) -> str:
    return _URL_SECRET.sub(r"\1REDACTED", _URL_USER.sub("//", value))


def secret_values(settings: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """Credential values a cassette must never contain, wherever they turn up (a tool that
    prints its environment, an error that echoes a header): the values of a model's
    credential-named settings (nested ones too, e.g. `extra_headers`) and of such environment
    variables. Short values are left alone: they would redact ordinary text."""
    found: list[str] = []

    def walk(name: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{name}.{k}", v)
        elif isinstance(value, str) and len(value) >= 8 and _SECRET.search(name):
            found.append(value)

    for name, value in settings.items():
        walk(str(name), value)
    found += [v for k, v in environ.items() if len(v) >= 8 and _SECRET_ENV.search(k)]
    return sorted(set(found), key=len, reverse=True)


def scrubber(secrets: Iterable[str]) -> Callable[[str], str]:
    """A function replacing each of `secrets` in a line with `[REDACTED]`."""
    values = list(secrets)
    if not values:
        return lambda line: line
    pattern = re.compile("|".join(re.escape(v) for v in values))
    return lambda line: pattern.sub("[REDACTED]", line)


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


@dataclass
class Cassette:
    """A recorded run, as `Recorder` wrote it: a header and its records (model turns,
    decisions, tool results, transitions, the outcome). `Cassette.load(path)` reads one and
    checks it; `replay` plays it back."""

    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    _turns: tuple[int, dict[int, dict[str, Any]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )  # (number of records it was built from, the turns): replay asks several times

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CassetteError(f"cannot read cassette {path}: {exc}") from None
        return cls.parse(lines, str(path))

    @classmethod
    def parse(cls, lines: Iterable[str], name: str = "cassette") -> Cassette:
        records: list[dict[str, Any]] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise CassetteError(f"{name} line {number}: not JSON ({why})") from None
            if not records and (not isinstance(record, dict) or record.get("kind") != "header"):
                break
            records.append(checked(record, name, number))
        if not records:
            raise CassetteError(f"{name} has no header line: not a loopstate cassette")
        header = records[0]
        if header["format"] != FORMAT or header["version"] > VERSION:
            raise CassetteError(
                f"{name} is format {header.get('format')} version {header.get('version')}; "
                f"this loopstate reads {FORMAT} up to version {VERSION}"
            )
        return cls(header, records[1:])

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def model_turns(self) -> dict[int, dict[str, Any]]:
        """The last recorded turn of each step (a step repeated after a crash keeps its last),
        each with its whole `request` rebuilt from the records before it. Treat as read-only."""
        if self._turns is not None and self._turns[0] == len(self.records):
            return self._turns[1]
        turns: dict[int, dict[str, Any]] = {}
        messages: list[Any] = []
        tools: list[Any] = []
        for record in self.of_kind("model"):
            messages = messages[: record["first"]] + record["messages"]
            tools = record.get("tools", tools)
            request = {"messages": messages, "tools": tools, "tool_choice": record["tool_choice"]}
            turns[record["step"]] = {**record, "request": request}
        self._turns = (len(self.records), turns)
        return turns

    def tool_results(self) -> dict[str, dict[str, Any]]:
        return {r["call_id"]: r for r in self.of_kind("tool")}

    def decisions(self) -> dict[str, dict[str, Any]]:
        return {r["call_id"]: r for r in self.of_kind("decision")}

    def outcome(self) -> dict[str, Any] | None:
        outcomes = self.of_kind("outcome")
        return outcomes[-1] if outcomes else None


def child_cassette(path: Path, call_id: str) -> Path:
    """Where the cassette at `path` keeps the child run of its call `call_id`."""
    return path.with_name(f"{path.stem}--{call_id}{path.suffix}")
