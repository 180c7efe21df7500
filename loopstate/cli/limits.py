"""What the CLI reads of a run's limits: `--budget LIMIT=VALUE` (as `resume(budget=...)`)."""

from __future__ import annotations

from pydantic import ValidationError

from loopstate.engine.budget import LIMITS, Budget
from loopstate.engine.errors import DefinitionError


def budget_of(items: list[str]) -> Budget:
    """A `Budget` naming the limits given as `LIMIT=VALUE` (several per item, comma
    separated); `DefinitionError` in one line for anything else."""
    given: dict[str, str] = {}
    for item in (part for text in items for part in text.split(",") if part.strip()):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in LIMITS:
            raise DefinitionError(
                f"--budget {item!r}: give LIMIT=VALUE with LIMIT one of {', '.join(LIMITS)}"
            )
        given[name] = value.strip()
    try:
        return Budget.model_validate(given)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DefinitionError(f"--budget {where}: {first['msg']}") from None
