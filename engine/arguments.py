"""A tool call's arguments: parsed strictly from the model's text, then deeply read-only.

Strict: the text must be standard JSON (no `NaN` or `Infinity`, which would be stored as
`null` and change meaning) nested at most `MAX_DEPTH` deep, and its strings are made
storable. Read-only: what approvers and hooks are handed cannot be changed behind the
approval's back (`FrozenDict` and `FrozenList` all the way down); tools get a fresh mutable copy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, NoReturn

from pydantic import AfterValidator

from loopstate.engine.sanitize import storable

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in arguments (deeper is refused, not a
`RecursionError` later in the store, the digest or a validator)."""


_READ_ONLY = "tool call arguments are read-only: decide an Edit to change them, never mutate them"


def _refuse(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(_READ_ONLY)


class FrozenDict(dict[str, Any]):
    """A `dict` that refuses every change: it serializes and compares as the dict it holds."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:  # copy and deepcopy rebuild it, never mutate it
        return (FrozenDict, (dict(self),))


class FrozenList(tuple[Any, ...]):
    """A JSON array as a tuple whose list methods say why they cannot be used (a plain
    tuple would answer `append` with a puzzling AttributeError). It equals, and prints as,
    the list it holds, so `request.arguments == {"argv": ["ls"]}` reads as it should."""

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = _refuse
    __hash__ = tuple.__hash__

    def __eq__(self, other: object) -> bool:
        return list(self) == other if isinstance(other, list) else tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return repr(list(self))


def freeze(value: Any, depth: int = 0) -> Any:
    """`value` (JSON data) as read-only data: objects as `FrozenDict`, arrays as `FrozenList`.
    Raises `ValueError` for a non-finite number or nesting deeper than `MAX_DEPTH`."""
    if isinstance(value, Mapping):
        _check_depth(depth)
        return FrozenDict({str(k): freeze(v, depth + 1) for k, v in value.items()})
    if isinstance(value, list | tuple):
        _check_depth(depth)
        return FrozenList(freeze(v, depth + 1) for v in value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number; send a finite number")
    return value


def thaw(value: Any) -> Any:
    """A fresh, mutable copy of frozen JSON data: dicts and lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def _check_depth(depth: int) -> None:
    if depth >= MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep; send flatter arguments")


def _frozen_arguments(value: dict[str, Any]) -> dict[str, Any]:
    frozen: dict[str, Any] = freeze(value)
    return frozen


Arguments = Annotated[dict[str, Any], AfterValidator(_frozen_arguments)]
"""The field type of arguments held in run data: validated, finite, bounded, read-only."""


def parse_arguments(raw: str) -> dict[str, Any]:
    """The model's argument text as a read-only JSON object (an empty text means none).

    Raises `ValueError` (the executor turns it into a result the model reads) for text that
    is not strict JSON, not an object, or nested deeper than `MAX_DEPTH`."""
    if not raw.strip():
        return FrozenDict()
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(
            f"nested more than {MAX_DEPTH} levels deep; send flatter arguments"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, not {type(value).__name__}")
    frozen: dict[str, Any] = freeze(value)  # first: it bounds the depth
    if raw.isascii() and "\\u" not in raw:  # no surrogate in the text, none escaped: none in it
        return frozen
    return storable(frozen)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON; send a finite number or null")
