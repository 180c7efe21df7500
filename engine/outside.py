"""The one entry rule for what enters a run from outside the process.

Text and data that arrive from outside — HTTP bodies, CLI arguments, decisions and the rules
they remember, external tools' results, messages, prompts, abort reasons — pass here before
anything is recorded, the same for the CLI, the Python API and HTTP:

- every string is made storable exactly as a model's reply is (`sanitize.storable`: a split
  surrogate pair joined, a lone surrogate replaced by U+FFFD), so an accepted request can
  never fail later to store;
- JSON data a run keeps as a value (an external tool's result) must be what JSON can carry
  and the store can hold: finite numbers only (NaN and Infinity refused, as in arguments),
  nested at most `MAX_DEPTH` deep (the arguments' bound), at most `MAX_VALUE_CHARS` long.
  Anything else is an `OutsideError` naming the field (HTTP answers it with 422).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar

from loopstate.engine.arguments import MAX_DEPTH
from loopstate.engine.sanitize import storable, storable_text

T = TypeVar("T")

MAX_VALUE_CHARS = 1_000_000
"""Longest JSON text of one value from outside (an external result) a run records."""


class OutsideError(ValueError):
    """Data from outside that no run may record: `field` names where it is."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def outside(value: T) -> T:
    """`value` with every string in it made storable (see the module's rule)."""
    return storable(value)


def outside_text(text: str) -> str:
    """One string from outside, made storable."""
    return storable_text(text)


def outside_json(value: Any, field: str = "value") -> Any:
    """`value` (JSON data from outside) checked and made storable; `OutsideError` naming
    `field` (or the path inside it) for a non-finite number, nesting deeper than
    `MAX_DEPTH` or a JSON text longer than `MAX_VALUE_CHARS`."""
    _check(value, field, 0)
    clean = storable(value)
    size = len(json.dumps(clean, separators=(",", ":"), ensure_ascii=False))
    if size > MAX_VALUE_CHARS:
        raise OutsideError(field, f"{size} characters of JSON; at most {MAX_VALUE_CHARS}")
    return clean


def _check(value: Any, field: str, depth: int) -> None:
    if isinstance(value, Mapping | list | tuple):
        if depth >= MAX_DEPTH:
            raise OutsideError(
                field, f"nested more than {MAX_DEPTH} levels deep; send flatter data"
            )
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, member in items:
            _check(member, f"{field}.{storable_text(str(key))}", depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise OutsideError(field, f"{value} is not a JSON number; send a finite number or null")
    elif not isinstance(value, str | int | float | bool | type(None)):
        raise OutsideError(field, f"{type(value).__name__} is not JSON data")
