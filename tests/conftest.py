"""Shared fixtures. Test helper modules in this folder import by name (see sys.path below)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _isolated_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test runs in its own directory, so the default store (`.loopstate/runs.db`
    under the working directory) never leaks between tests or into the repo."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
