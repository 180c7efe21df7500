"""The base of every value that crosses a port: frozen, keyword-only, strict about extras."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict

_set = object.__setattr__
_F = TypeVar("_F", bound=BaseModel)


class Frozen(BaseModel):
    """Immutable, serializable data. New fields only ever arrive with defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    _fields_sets: ClassVar[dict[int, set[str]]] = {}
    """Per model, by count: the set of field names its instances given those names share."""
    _names: ClassVar[tuple[str, ...]] = ()
    """The model's field names, in order."""
    _name_set: ClassVar[frozenset[str]] = frozenset()
    _defaults: ClassVar[dict[str, Any]] = {}
    """The defaults `trusted` fills in (a field with a default factory must be given)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._fields_sets = {}
        cls._names = tuple(cls.model_fields)
        cls._name_set = frozenset(cls._names)
        cls._defaults = {
            name: field.default
            for name, field in cls.model_fields.items()
            if not field.is_required() and field.default_factory is None
        }

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
        """An instance of `fields`, unvalidated: values already valid, omitted ones taking
        their defaults (a fraction of validation's cost, for hot paths).

        The values are set one by one, in the model's field order, as attributes of a new
        instance, so CPython keeps them inline in the instance (keys shared by the class):
        half the memory of the dict validation gives each instance, and a run keeps all
        its events and transitions.
        """
        given, names = fields, cls._names
        if len(fields) != len(names):
            fields = {**cls._defaults, **fields}
        new = object.__new__(cls)
        try:
            for name in names:
                _set(new, name, fields[name])
        except KeyError:
            raise cls._refused("trusted", given) from None
        if len(fields) != len(names):
            raise cls._refused("trusted", given)
        shared = cls._fields_sets.get(len(given))
        if shared is None or shared != given.keys():
            shared = cls._shared(set(given))
        return _sealed(new, shared)

    @classmethod
    def fleeting(cls, **fields: Any) -> Self:
        """`trusted` for a value handed on and dropped (a per-chunk delta), or copied before a
        run keeps it (`evolve`): kept as a dict, which is ~2-5x faster to make than values
        set inline but twice their memory. Omitted fields take their defaults, as in
        `trusted`."""
        given = fields
        if len(fields) != len(cls._names):  # in the fields' order, as validation keeps them
            merged = {**cls._defaults, **fields}
            fields = {name: merged[name] for name in cls._names if name in merged}
            if len(fields) != len(merged):  # unknown fields given
                raise cls._refused("fleeting", given)
        if fields.keys() != cls._name_set:
            raise cls._refused("fleeting", given)
        new = object.__new__(cls)
        _set(new, "__dict__", fields)
        return _sealed(new, cls._fields_sets.get(len(given)) or cls._shared(set(given)))

    @classmethod
    def _refused(cls, how: str, fields: dict[str, Any]) -> TypeError:
        """Why `how` (`trusted` or `fleeting`) cannot make an instance of `fields`."""
        made = f"{cls.__name__}.{how}"
        unknown = sorted(fields.keys() - cls.model_fields.keys())
        if unknown:
            return TypeError(f"{made}: unknown fields {unknown}")
        missing = sorted(cls.model_fields.keys() - fields.keys() - cls._defaults.keys())
        return TypeError(f"{made} needs its required fields; missing {missing}")

    def evolve(self, **changes: Any) -> Self:
        """A copy with `changes` applied, unvalidated: for trusted values on hot paths.

        Same result as `model_copy(update=changes)`, at a fraction of its cost (no deep
        `__copy__` machinery); `changes` must already be valid values of the fields.
        """
        new = object.__new__(type(self))
        fields = dict(self.__dict__)
        fields.update(changes)
        _set(new, "__dict__", fields)
        fields_set = self.__pydantic_fields_set__
        if not changes.keys() <= fields_set:
            fields_set = self._shared(fields_set | changes.keys())
        return _sealed(new, fields_set)


def _sealed(new: _F, fields_set: set[str]) -> _F:
    """`new`, given what pydantic keeps beside the fields: the names set, no extras."""
    _set(new, "__pydantic_fields_set__", fields_set)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new
