"""`@tool`: turn a typed function into a `Tool` with validated arguments and a JSON schema."""

from __future__ import annotations

import inspect
import re
import sys
import warnings
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, get_type_hints, overload

from pydantic import ConfigDict, Field, create_model

from loopstate.engine.approval import DECISION_KINDS, DecisionKind, Gate
from loopstate.engine.deadlines import Expiry, check_expiry, seconds
from loopstate.engine.errors import DefinitionError, ToolDefinitionWarning
from loopstate.engine.tool import ApprovalPredicate, Tool, ToolContext

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | Callable[..., bool | Gate] = False,
    timeout: float | None = None,
    retries: int = 0,
    category: str = "general",
    idempotent: bool = False,
    max_result_chars: int = 20_000,
    allowed_decisions: Iterable[str] | None = None,
    external: bool = False,
    asks: bool = False,
    decide_within: timedelta | float | None = None,
    on_expiry: Expiry | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | Callable[..., bool | Gate] = False,
    timeout: float | None = None,
    retries: int = 0,
    category: str = "general",
    idempotent: bool = False,
    max_result_chars: int = 20_000,
    allowed_decisions: Iterable[str] | None = None,
    external: bool = False,
    asks: bool = False,
    decide_within: timedelta | float | None = None,
    on_expiry: Expiry | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool. Use bare (`@tool`) or with options (`@tool(needs_approval=True)`).

    Parameters become a pydantic model (validation and JSON schema); the docstring's first part
    is the description, and `Args:` lines describe parameters. A parameter annotated
    `ToolContext` receives the run's context and is hidden from the model.

    `needs_approval` is a bool or a predicate over the validated arguments (and optionally the
    context): `needs_approval=lambda args: args.amount >= 100`.

    `allowed_decisions` limits what a reviewer may decide for its calls, e.g.
    `("approve", "deny")` forbids edits; `abort` is always allowed.

    `external=True` declares a tool whose body never runs here: each call suspends the run
    until its result is supplied (`resume(results={call_id: value})`, `loopstate result`),
    validated against the return annotation.

    `asks=True` declares an async tool whose body may `await ctx.ask(question, schema=...)`:
    the run suspends until a person answers, then the body runs again from the start and the
    `ask` returns the answer (code before an `ask` must be safe to repeat).

    `decide_within` (a `timedelta` or seconds) is how long a gated call may wait for a
    decision; then `on_expiry` decides it — `Deny("no answer in time")` (the default),
    `Abort()` or `Escalate(to="...")` — applied by whoever drives runs (the worker, `serve`),
    recorded with actor `deadline`.
    """

    def build(func: Callable[..., Any], localns: dict[str, Any] | None = None) -> Tool:
        # Annotations may name classes local to the decorating scope (postponed evaluation).
        if localns is None:
            localns = dict(sys._getframe(1).f_locals)
        return _build(
            func,
            localns=localns,
            name=name or func.__name__,
            description=description,
            needs_approval=_predicate(needs_approval),
            timeout=timeout,
            retries=retries,
            category=category,
            idempotent=idempotent,
            max_result_chars=max_result_chars,
            allowed_decisions=_allowed(name or func.__name__, allowed_decisions, external),
            external=external,
            asks=asks,
            decide_within=seconds(decide_within),
            on_expiry=on_expiry,
        )

    return build(fn, dict(sys._getframe(1).f_locals)) if fn is not None else build


def _allowed(name: str, given: Iterable[str] | None, external: bool) -> tuple[DecisionKind, ...]:
    if external:  # nothing to approve or edit: a result, or a refusal
        return ("deny", "abort", "result")
    if given is None:
        return DECISION_KINDS
    if isinstance(given, str):
        given = (given,)
    wanted = set(given)
    unknown = sorted(wanted - set(DECISION_KINDS))
    if unknown:
        raise DefinitionError(
            f"tool {name!r}: allowed_decisions has {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(DECISION_KINDS)}"
        )
    return tuple(k for k in DECISION_KINDS if k in wanted or k == "abort")


def _build(
    func: Callable[..., Any],
    *,
    name: str,
    description: str | None,
    localns: dict[str, Any],
    **options: Any,
) -> Tool:
    if not _NAME.match(name):
        raise DefinitionError(f"tool name {name!r} must match {_NAME.pattern}")
    if options["timeout"] is not None and options["timeout"] <= 0:
        raise DefinitionError(f"tool {name!r}: timeout must be positive")
    if options["asks"] and not inspect.iscoroutinefunction(func):
        raise DefinitionError(f"tool {name!r}: asks=True needs an async function (ctx.ask awaits)")
    check_expiry(f"tool {name!r}", options["decide_within"], options["on_expiry"])
    if options["retries"] < 0:
        raise DefinitionError(f"tool {name!r}: retries must be >= 0")
    summary, arg_docs = _parse_docstring(inspect.getdoc(func) or "")
    try:
        hints = get_type_hints(func, localns=localns, include_extras=True)
    except NameError as exc:
        raise DefinitionError(f"tool {name!r}: cannot resolve an annotation: {exc}") from None
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DefinitionError(
                f"tool {name!r}: *args and **kwargs cannot be described to a model"
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
    args_model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    _warn_if_vague(func, name, untyped=[p for p in fields if p not in hints], documented=summary)
    return Tool(
        name=name,
        description=description or summary or name,
        args_model=args_model,
        fn=func,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(func),
        result_type=hints.get("return", Any),
        **options,
    )


def _warn_if_vague(
    func: Callable[..., Any], name: str, *, untyped: list[str], documented: str
) -> None:
    """Warn, at the function's definition, about what the model will not be told."""
    problems = []
    if untyped:
        listed = ", ".join(repr(p) for p in untyped)
        problems.append(f"parameter {listed} has no type hint (the model sees no type and "
                        "nothing is validated)")  # fmt: skip
    if not documented:
        problems.append("it has no docstring (the model sees only its name as description)")
    if not problems:
        return
    code = getattr(func, "__code__", None)
    warnings.warn_explicit(
        f"tool {name!r}: {'; '.join(problems)}",
        ToolDefinitionWarning,
        filename=code.co_filename if code else "<unknown>",
        lineno=code.co_firstlineno if code else 0,
        module=getattr(func, "__module__", None),
    )


def _is_context(annotation: Any) -> bool:
    origin = getattr(annotation, "__origin__", annotation)
    return inspect.isclass(origin) and issubclass(origin, ToolContext)


def _predicate(value: bool | Callable[..., bool | Gate]) -> bool | ApprovalPredicate:
    """Accept predicates of one (arguments) or two (arguments, context) parameters."""
    if isinstance(value, bool):
        return value
    if not callable(value):
        raise DefinitionError("needs_approval must be a bool or a callable")
    arity = len(inspect.signature(value).parameters)
    if arity == 1:
        return lambda args, ctx: value(args)
    if arity == 2:
        return value
    raise DefinitionError("a needs_approval predicate takes (arguments) or (arguments, context)")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and its `Args:` descriptions."""
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            match = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if match and not line.startswith(" " * 8):
                current = match.group(1)
                args[current] = match.group(2)
            elif stripped and current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
            elif not stripped:
                current = None
            continue
        summary_lines.append(line)
    return "\n".join(summary_lines).strip(), args
