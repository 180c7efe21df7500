"""Typed flow data: `Flow(data=Model)` declares what a flow collects as a pydantic model; gates
(and the rules of code phases) name the fields they read with `@reads(...)`.

    definition:  every gate of `advance` names its fields; each name is a field of the model
                 (dotted through nested models: "answers.weekly_volume"), each output lands in
                 a field → else `DefinitionError`, naming the gate and the field
    a tool call: what its `update` would make of the data must fit the model → else the call
                 fails and the model is told why (an unknown field, a wrong type), to correct
    a gate:      a field it reads is absent (missing or None) → it does not open (fail closed);
                 the reason is kept on the run (`FlowPosition.held`)

A gate receives the data validated into the model. Without `data=`, gates receive the dict and
`@reads` still closes a gate whose field is absent.
"""

from __future__ import annotations

import asyncio
import functools
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError
from statemachine import StateChart

from loopstate.engine.errors import DefinitionError
from loopstate.engine.tool import Tool, ToolContext
from loopstate.machines.flows.phase import BoundPhase, FlowData, Update

F = TypeVar("F", bound=Callable[..., Any])
_READS = "__loopstate_reads__"


def reads(*fields: str) -> Callable[[F], F]:
    """Name the data fields a gate (or a code phase's function) reads. Checked against the
    flow's `data=` model when the flow is defined; on a gate, a field absent at run time keeps
    the gate closed."""

    def mark(fn: F) -> F:
        @functools.wraps(fn)
        def gate(*args: Any, **kwargs: Any) -> Any:
            data = kwargs.get("data")  # a gate gets its facts by name from the flow's table
            if data is not None and absent(data, fields):
                return False
            return fn(*args, **kwargs)

        setattr(gate, _READS, tuple(fields))
        return cast(F, gate)

    return mark


def fields_read(fn: object) -> tuple[str, ...] | None:
    """The fields `fn` says it reads (`@reads`), or None if it says nothing."""
    named = getattr(fn, _READS, None)
    return None if named is None else tuple(named)


def absent(data: Any, fields: Iterable[str]) -> list[str]:
    """The `fields` (dotted paths) that `data` (a model or a dict) lacks or holds as None."""
    return [path for path in fields if _lookup(data, path) is None]


def _lookup(data: Any, path: str) -> Any:
    value = data
    for part in path.split("."):
        if isinstance(value, BaseModel):
            value = getattr(value, part, None)
        elif isinstance(value, Mapping):
            value = value.get(part)
        else:
            return None
    return value


def field_error(model: type[BaseModel], path: str) -> str | None:
    """Why `path` ("a.b") names no field of `model`, or None when it does."""
    current: type[BaseModel] | None = model
    walked = model.__name__
    for part in path.split("."):
        if current is None:
            return f"{walked} has no fields to read {part!r} from"
        fields = current.model_fields
        if part not in fields:
            return f"{walked} has no field {part!r} (its fields: {', '.join(fields)})"
        annotation = fields[part].annotation
        if _is_open_mapping(annotation):
            return None  # a dict field: any key may be read
        current, walked = _model_in(annotation), f"{walked}.{part}"
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (`M`, `M | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [m for a in typing.get_args(annotation) if (m := _model_in(a)) is not None]
        return found[0] if len(found) == 1 else None
    return None


def _is_open_mapping(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return origin in (dict, Mapping) or annotation is Any


# -- definition ------------------------------------------------------------------------------


def check_data_model(
    model: type[BaseModel], machine: type[StateChart[Any]], phases: Mapping[str, BoundPhase]
) -> None:
    """Fail at definition unless the gates and the phases fit the data model `model`."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise DefinitionError(f"Flow(data=...) takes a pydantic model class, not {model!r}")
    for state in machine.states:
        for t in state.transitions:
            if "advance" not in t.events:
                continue
            for spec in t.cond:
                _check_gate(model, machine, state.id, str(spec.func))
    for name, bound in phases.items():
        _check_phase(model, name, bound)


def _check_phase(model: type[BaseModel], name: str, bound: BoundPhase) -> None:
    key, output = bound.output_key, bound.output
    if key is not None and key not in model.model_fields:
        raise DefinitionError(
            f"phase {name!r} puts its output in {key!r}: {model.__name__} has "
            f"no such field (its fields: {', '.join(model.model_fields)})"
        )
    if key is not None and output is not None:
        held = _model_in(model.model_fields[key].annotation)
        if held is not None and not issubclass(output.model, held):
            raise DefinitionError(
                f"phase {name!r} puts a {output.model.__name__} in {key!r}, which "
                f"{model.__name__} holds as a {held.__name__}"
            )
    spec = bound.spec
    for what, fn in (("action", spec.action), ("on_enter", spec.on_enter)):
        for path in fields_read(fn) or ():
            if (error := field_error(model, path)) is not None:
                raise DefinitionError(f"phase {name!r}: its {what} reads {path!r}: {error}")


def _check_gate(
    model: type[BaseModel], machine: type[StateChart[Any]], phase: str, gate: str
) -> None:
    named = fields_read(getattr(machine, gate, None))
    if named is None:
        raise DefinitionError(
            f"{machine.__name__}: gate {gate!r} (leaving phase {phase!r}) does not name the "
            f"fields it reads: decorate it with @reads(...) (a flow with data={model.__name__})"
        )
    for path in named:
        if (error := field_error(model, path)) is not None:
            raise DefinitionError(
                f"{machine.__name__}: gate {gate!r} (leaving phase {phase!r}) reads {path!r}: "
                f"{error}"
            )


# -- run time --------------------------------------------------------------------------------


def fit(model: type[BaseModel] | None, data: FlowData) -> tuple[FlowData, Any]:
    """`data` as stored (validated, unset fields left out) and as gates see it (the model);
    unchanged without a model. `ValueError` (pydantic's `ValidationError` among them) when it
    does not fit."""
    if model is None:
        return data, data
    typed = model.model_validate(data)
    stored = typed.model_dump(mode="json", exclude_unset=True)
    unknown = _dropped(data, stored)
    if unknown:  # a model that ignores extra keys would lose them silently: refuse them
        raise ValueError(f"{', '.join(unknown)}: not a field of {model.__name__}")
    return stored, typed


def misfit(model: type[BaseModel], data: FlowData) -> str | None:
    """Why `data` does not fit `model`, in one line per error, or None."""
    try:
        fit(model, data)
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'data'}: {e['msg']}" for e in exc.errors()
        )
    except ValueError as exc:
        return str(exc)
    return None


def _dropped(given: Any, kept: Any, prefix: str = "") -> list[str]:
    """The keys of `given` that validation left out of `kept` (dotted), however deep."""
    if not isinstance(given, Mapping) or not isinstance(kept, Mapping):
        return []
    dropped: list[str] = []
    for key, value in given.items():
        path = f"{prefix}{key}"
        if key not in kept:
            dropped.append(path)
        else:
            dropped += _dropped(value, kept[key], f"{path}.")
    return dropped


def closed_gates(machine: type[StateChart[Any]], phase: str, facts: Any) -> str | None:
    """Why `phase`'s gates stayed closed because of absent fields (None: they read what they
    need and said no)."""
    reasons: list[str] = []
    for state in machine.states:
        if state.id != phase:
            continue
        for t in state.transitions:
            if "advance" not in t.events:
                continue
            for spec in t.cond:
                missing = absent(facts, fields_read(getattr(machine, str(spec.func), None)) or ())
                if missing:
                    reasons.append(f"gate {spec.func} reads {', '.join(missing)}: absent")
    return "; ".join(dict.fromkeys(reasons)) or None


def typed_tools(bound: BoundPhase, model: type[BaseModel]) -> BoundPhase:
    """`bound` with each tool that updates the data checking first that its update fits
    `model`: a call whose update would not fit fails, and the model is told why."""
    updates = bound.spec.updates
    tools = {
        name: _checked(tool, updates[name], model) if name in updates else tool
        for name, tool in bound.tools.items()
    }
    if bound.output_tool in tools:  # a key the output does not know is refused, not dropped
        tool = tools[bound.output_tool]
        tools[bound.output_tool] = replace(tool, args_model=_forbidding(tool.args_model))
    return replace(bound, tools=tools)


def _forbidding(args: type[BaseModel]) -> type[BaseModel]:
    """`args`, refusing keys it does not know (its own fields, same schema otherwise)."""
    if args.model_config.get("extra") == "forbid":
        return args
    config = {**args.model_config, "extra": "forbid"}
    return type(args.__name__, (args,), {"model_config": config, "__doc__": args.__doc__})


def _checked(tool: Tool, update: Update, model: type[BaseModel]) -> Tool:
    own = tool.context_param
    param = own or "_flow_ctx"

    async def fn(**kwargs: Any) -> Any:
        ctx: ToolContext[Any] = kwargs[param] if own else kwargs.pop(param)
        arguments = tool.args_model.model_validate(
            {k: v for k, v in kwargs.items() if k != own}
        ).model_dump(mode="json")
        data = dict(getattr(ctx.deps, "data", {}))
        if (why := misfit(model, update(data, arguments))) is not None:
            raise ValueError(f"this does not fit the flow's {model.__name__}: {why}")
        if tool.is_async:
            return await tool.fn(**kwargs)
        return await asyncio.to_thread(tool.fn, **kwargs)

    return replace(tool, fn=fn, context_param=param, is_async=True)
