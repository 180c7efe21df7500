"""Time and id ports: the machine and its guards never read the clock or make random ids."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

Clock = Callable[[], float]
IdSource = Callable[[], str]

system_clock: Clock = time.time


def random_ids() -> str:
    return uuid.uuid4().hex


def counting_ids(prefix: str = "run") -> IdSource:
    """Deterministic ids for tests and replays: `run-1`, `run-2`, ..."""
    n = 0

    def next_id() -> str:
        nonlocal n
        n += 1
        return f"{prefix}-{n}"

    return next_id
