"""The base of every value that crosses a port: frozen, keyword-only, strict about extras."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, serializable data. New fields only ever arrive with defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    _fields_sets: ClassVar[dict[int, set[str]]] = {}
    """Per model, by count: the set of field names its instances given those names share."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._fields_sets = {}

    @classmethod
    def _shared(cls, fields: set[str]) -> set[str]:
        shared = cls._fields_sets.setdefault(len(fields), fields)
        return shared if shared == fields else fields

    def model_post_init(self, context: Any, /) -> None:
        self._share_names()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied._share_names()
        return copied

    def _share_names(self) -> None:
        """Share the set of the names of the fields this instance was given with the other
        instances given the same names. pydantic gives each instance its own (216-728 bytes,
        more than most messages' and events' values, and a run keeps every one of them);
        frozen instances never change theirs (pydantic's `model_copy` copies it before an
        update). Done as an instance is made or copied; `trusted` and `evolve` share too."""
        fields = self.__pydantic_fields_set__
        shared = self._shared(fields)
        if shared is not fields:
            object.__setattr__(self, "__pydantic_fields_set__", shared)

    @classmethod
    def trusted(cls, **fields: Any) -> Self:
        """An instance of `fields`, unvalidated: every field of the model, already valid
        (what `model_construct` makes, at a fraction of its cost, for per-chunk paths)."""
        new = object.__new__(cls)
        object.__setattr__(new, "__dict__", fields)
        names = cls._fields_sets.get(len(fields))
        if names is None or names != fields.keys():
            if fields.keys() != cls.model_fields.keys():
                missing = sorted(cls.model_fields.keys() - fields.keys())
                raise TypeError(f"{cls.__name__}.trusted needs every field; missing {missing}")
            names = cls._shared(set(fields))
        object.__setattr__(new, "__pydantic_fields_set__", names)
        object.__setattr__(new, "__pydantic_extra__", None)
        object.__setattr__(new, "__pydantic_private__", None)
        return new

    def evolve(self, **changes: Any) -> Self:
        """A copy with `changes` applied, unvalidated: for trusted values on hot paths.

        Same result as `model_copy(update=changes)`, at a fraction of its cost (no deep
        `__copy__` machinery); `changes` must already be valid values of the fields.
        """
        new = object.__new__(type(self))
        fields = dict(self.__dict__)
        fields.update(changes)
        object.__setattr__(new, "__dict__", fields)
        fields_set = self.__pydantic_fields_set__
        if not changes.keys() <= fields_set:
            fields_set = self._shared(fields_set | changes.keys())
        object.__setattr__(new, "__pydantic_fields_set__", fields_set)
        object.__setattr__(new, "__pydantic_extra__", None)
        object.__setattr__(new, "__pydantic_private__", None)
        return new
