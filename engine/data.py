"""The base of every value that crosses a port: frozen, keyword-only, strict about extras."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, serializable data. New fields only ever arrive with defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def evolve(self, **changes: Any) -> Self:
        """A copy with `changes` applied, unvalidated: for trusted values on hot paths.

        Same result as `model_copy(update=changes)`, at a fraction of its cost (no deep
        `__copy__` machinery); `changes` must already be valid values of the fields.
        """
        new = object.__new__(type(self))
        fields = dict(self.__dict__)
        fields.update(changes)
        object.__setattr__(new, "__dict__", fields)
        object.__setattr__(
            new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | changes.keys()
        )
        object.__setattr__(new, "__pydantic_extra__", None)
        object.__setattr__(new, "__pydantic_private__", None)
        return new
