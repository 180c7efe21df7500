"""The tool port: a validated, schema-carrying callable and the one context every tool gets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

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

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.call_id}"


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


def render_result(value: Any) -> str:
    """A tool's return value as the text the model sees."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


AsyncToolFn = Callable[..., Awaitable[Any]]
