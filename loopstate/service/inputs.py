"""The shape of what a request brings in, checked before any route does work with it.

Bodies: strict JSON (a boolean is `true` or `false`, never `"yes"`; no unknown fields), their
text made storable and their JSON values bounded by the one entry rule for outside data
(`loopstate.engine.outside`): a refusal is a 422 naming the field, and nothing is recorded.
Headers and query values a route parses itself (`Last-Event-ID`) are read strictly: ASCII
digits, bounded length; anything else is a 400.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from loopstate.engine.outside import outside, outside_json
from loopstate.service.problems import Problem


class Body(BaseModel):
    """A request body: strict, closed, frozen, its text made storable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        return outside(data)


def _value(value: Any) -> Any:
    return outside_json(value, "value")


def _arguments(value: Any) -> Any:
    return None if value is None else outside_json(value, "arguments")


JsonValue = Annotated[Any, AfterValidator(_value)]
"""Any JSON value a run may keep: finite numbers, nested at most 64 deep, bounded in size."""
JsonArguments = Annotated[dict[str, Any] | None, AfterValidator(_arguments)]
"""Edited arguments, bounded as a model's arguments are."""

MAX_EVENT_ID_DIGITS = 12


def event_id(value: str | None) -> int | None:
    """`Last-Event-ID` (header or query): None when absent, else the id it names; 400 for
    anything but up to 12 ASCII digits."""
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_EVENT_ID_DIGITS:
        raise Problem(400, "Last-Event-ID must be an event id this stream sent")
    return int(value)


MAX_ID_CHARS = 512


def check_id(value: str, kind: str) -> str:
    """A run or call id from a path: 404 for one no run could have (too long, or holding
    control characters), before any store is asked."""
    if len(value) > MAX_ID_CHARS or not value.isprintable():
        raise Problem(404, f"no {kind} with that id")
    return value


def check_query(value: str | None, name: str) -> str | None:
    """A query value used to look runs up: 400 for one holding control characters or longer
    than any id (no store is asked about it)."""
    if value is not None and (len(value) > MAX_ID_CHARS or not value.isprintable()):
        raise Problem(400, f"{name} is not a value this API takes")
    return value
