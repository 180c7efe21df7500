"""The tool port: a validated, schema-carrying callable and the one context every tool gets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, TypeAdapter

from loopstate.engine.approval import DECISION_KINDS, DecisionKind, Gate
from loopstate.engine.logs import get_logger
from loopstate.engine.model import ToolDefinition

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[DepsT]):
    """What a tool may know about the run it serves. Declare a parameter of this type to get it.

    `idempotency_key` is stable for one call across retries, resumes and processes: pass it to
    external systems that deduplicate.
    """

    run_id: str
    call_id: str
    tool: str
    deps: DepsT
    workspace: Path | None = None
    log: Any = field(default_factory=lambda: get_logger("loopstate.tool"))
    decision_data: Mapping[str, Any] = field(default_factory=dict)
    """Data the reviewer attached to the decision that let this call run (`Approve(data=...)`,
    `Edit(data=...)`); the model never sees it."""
    answers: tuple[Any, ...] = ()
    """The answers recorded for this call's `ask`s so far, in the order they were asked."""
    _asked: list[int] = field(default_factory=lambda: [0], repr=False, compare=False)

    async def ask(self, question: str, *, schema: Any = None) -> Any:
        """Ask a person `question` and wait for the answer, durably (a tool declared with
        `@tool(asks=True)`; async tools only).

        The first time, the run suspends like an external call: the call is listed in
        `pending` with the question (`reason`) and the answer's JSON schema, the process may
        exit, and the answer arrives through `resume(results={call_id: answer})`,
        `loopstate result` or the HTTP result route, validated against `schema` (a JSON schema
        or a Python type; none: any JSON value). Then the tool's body runs again FROM THE
        START and this same `ask` returns the recorded answer at once, so the code before an
        `ask` runs again and must be safe to repeat. A Python `schema` gets its answer
        validated into that type."""
        index = self._asked[0]
        self._asked[0] += 1
        json_schema, adapter = _answer_schema(schema)
        if index < len(self.answers):
            answer = self.answers[index]
            return answer if adapter is None else adapter.validate_python(answer)
        raise AskPending(question=question, schema=json_schema)

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.call_id}"


class AskPending(Exception):
    """Raised by `ToolContext.ask` when its question has no answer yet: the executor suspends
    the call until one is supplied. A tool must let it pass (catch `Exception` narrowly)."""

    def __init__(self, *, question: str, schema: dict[str, Any] | None) -> None:
        super().__init__(question)
        self.question = question
        self.schema = schema


def _answer_schema(schema: Any) -> tuple[dict[str, Any] | None, TypeAdapter[Any] | None]:
    """An `ask`'s schema as JSON schema, and the adapter that validates a Python type's answer."""
    if schema is None:
        return None, None
    if isinstance(schema, dict):
        return schema, None
    adapter: TypeAdapter[Any] = TypeAdapter(schema)
    return adapter.json_schema(), adapter


ApprovalPredicate = Callable[[Any, "ToolContext[Any]"], "bool | Gate"]


@dataclass(frozen=True)
class Tool:
    """A function the model may call. Build one with `loopstate.tool`, not by hand."""

    name: str
    description: str
    args_model: type[BaseModel]
    fn: Callable[..., Any]
    context_param: str | None = None
    needs_approval: bool | ApprovalPredicate = False
    timeout: float | None = None
    retries: int = 0
    category: str = "general"
    idempotent: bool = False
    is_async: bool = False
    max_result_chars: int = 20_000
    allowed_decisions: tuple[DecisionKind, ...] = DECISION_KINDS
    """The decisions a reviewer may give this tool's calls (e.g. no `edit`); `abort` is always
    among them: a tool cannot forbid stopping the run."""
    external: bool = False
    """No body runs here: each call waits until its result is supplied from outside."""
    result_type: Any = Any
    """The declared result type (the function's return annotation) a supplied result must fit."""
    asks: bool = False
    """Its body may `await ctx.ask(...)`: it suspends the run until a person answers, then runs
    again from the start (see `ToolContext.ask`)."""
    decide_within: float | None = None
    """Seconds a gated call may wait for a decision before `on_expiry` decides it."""
    on_expiry: Any = None
    """What decides a call whose `decide_within` passed: `Deny(...)` (the default),
    `Abort()` or `Escalate(to=...)` (see `loopstate.engine.deadlines`)."""
    parameters: dict[str, Any] | None = None
    """A JSON schema to show the model instead of the one derived from `args_model`
    (replay's stand-in tools carry the recorded schema this way)."""

    @cached_property
    def definition(self) -> ToolDefinition:
        if self.parameters is not None:
            return ToolDefinition(
                name=self.name, description=self.description, parameters=self.parameters
            )
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolDefinition(name=self.name, description=self.description, parameters=schema)

    @cached_property
    def result_adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.result_type)

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Validate arguments against the schema; raises `pydantic.ValidationError`."""
        return self.args_model.model_validate(arguments)

    def gated(self, args: BaseModel, ctx: ToolContext[Any]) -> bool | Gate:
        """Whether this call must wait for a decision before it runs (a `Gate` if the
        predicate described the request)."""
        if isinstance(self.needs_approval, bool):
            return self.needs_approval
        answer = self.needs_approval(args, ctx)
        return answer if isinstance(answer, Gate) else bool(answer)

    async def invoke(self, args: BaseModel, ctx: ToolContext[Any]) -> str:
        """Run the function once (no timeout, no retries: the executor owns those)."""
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self.is_async:
            value = await self.fn(**kwargs)
        else:
            # A sync tool runs in a worker thread so a slow one cannot stall other runs.
            value = await asyncio.to_thread(self.fn, **kwargs)
        return render_result(value)


@runtime_checkable
class Toolset(Protocol):
    """Tools that come from elsewhere (an MCP server: `loopstate.tools.mcp.MCPServer`), given
    to an `Agent` among its tools. A run opens `session()` around itself and lists the tools
    in it (once per agent and process): a process that resumes the run lists them anew, and
    a pending call whose tool vanished or changed its schema is refused."""

    def session(self) -> AbstractAsyncContextManager[None]: ...
    async def list_tools(self) -> Sequence[Tool]: ...


def render_result(value: Any) -> str:
    """A tool's return value as the text the model sees. Bytes (a subprocess's output) are
    read as UTF-8, a byte that is not shown as U+FFFD, never as Python's `b'...'` repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


AsyncToolFn = Callable[..., Awaitable[Any]]
