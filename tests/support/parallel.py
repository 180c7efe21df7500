"""The suite runs in parallel (pytest-xdist, see `scripts/test`): what is shared or kept
together across the worker processes.

- A test file with a module-scoped fixture (a server or a run started once for the file) would
  start it again on every worker that gets one of its tests: such a file is one unit of work,
  sent whole to one worker, so the fixture starts once; every other test is a unit of its own.
  (pytest-xdist's own `--dist loadgroup` cannot do this with pytest 9: it regroups by editing
  a node id pytest 9 no longer reads.)
- The wheel is built once per run, not once per worker: the first worker builds it into the
  run's shared temporary folder under a file lock; the others wait for it and reuse it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TypeVar

import pytest
from filelock import FileLock
from xdist.scheduler import LoadScopeScheduling

T = TypeVar("T")
MODULE_SCOPE = re.compile(r"""scope\s*=\s*["']module["']""")


class ModuleFixtureScheduling(LoadScopeScheduling):
    """`--dist load`, except that a file with a module-scoped fixture is one unit."""

    def _split_scope(self, nodeid: str) -> str:
        # The one method pytest-xdist's schedulers override to choose the units of work.
        file = nodeid.split("::")[0]
        return file if _has_module_fixture(self.config.rootpath / file) else nodeid


@cache
def _has_module_fixture(path: Path) -> bool:
    return path.suffix == ".py" and MODULE_SCOPE.search(path.read_text()) is not None


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, make: Callable[[Path], T]
) -> T:
    """`make(folder)` once for the whole run, its result shared by every worker. `make` is
    called by each worker in turn, under a lock: it does the work the first time and must
    give the same result again on a folder it already filled."""
    if worker_id == "master":  # not parallel: this session is the whole run
        return make(tmp_path_factory.mktemp(name))
    folder = tmp_path_factory.getbasetemp().parent / name  # the run's folder, shared by workers
    with FileLock(f"{folder}.lock"):
        return make(folder)
