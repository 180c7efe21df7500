"""Make text that entered a run from outside storable: no lone surrogates.

A Python `str` can hold code points UTF-8 cannot encode: the surrogates U+D800–U+DFFF. A
model's reply decoded from `"\\ud800"` in JSON, or a tool that returns bytes decoded with
`surrogateescape`, carries them in; SQLite, pydantic's JSON and cassettes then refuse the
whole value. `storable` is applied where such text crosses into a run (a model's reply, a
tool's result): a surrogate pair split into two code points is joined into the character it
encodes, and every lone surrogate becomes U+FFFD (the replacement character).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

T = TypeVar("T")

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """`text` with split surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable(value: T) -> T:
    """`value` with every string in it made storable (see `storable_text`): strings, and
    the strings inside lists, tuples, dicts and pydantic models, dict keys included.

    Returns `value` itself when nothing needed a change, so the common case costs one scan
    and no copy. A changed pydantic model is rebuilt with `model_copy` (frozen data stays
    frozen); a changed container is rebuilt as the same type.
    """
    if isinstance(value, BaseModel):
        try:  # the common case at C speed: a model whose JSON encodes holds no surrogate
            type(value).__pydantic_serializer__.to_json(value)
            return value
        except PydanticSerializationError:
            pass
    return _storable(value)  # type: ignore[no-any-return]  # the same type comes back


_DEEPEST = 128
"""Data nested deeper is left as it is: no run keeps it (arguments and outside data are
refused past 64 levels), and a hostile body must not exhaust the stack here first."""


def _storable(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if depth > _DEEPEST:
        return value
    depth += 1
    if isinstance(value, BaseModel):
        changes = {
            name: new
            for name, old in value.__dict__.items()
            if (new := _storable(old, depth)) is not old
        }
        return value.model_copy(update=changes) if changes else value
    if isinstance(value, dict):
        items = [(_storable(k, depth), _storable(v, depth)) for k, v in value.items()]
        if all(k is ok and v is ov for (k, v), (ok, ov) in zip(items, value.items(), strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, list | tuple):
        members = [_storable(v, depth) for v in value]
        if all(new is old for new, old in zip(members, value, strict=True)):
            return value
        return type(value)(members)
    return value
