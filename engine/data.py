"""The base of every value that crosses a port: frozen, keyword-only, strict about extras."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, serializable data. New fields only ever arrive with defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")
