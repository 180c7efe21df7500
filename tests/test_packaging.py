"""A wheel built from the repo carries the folder mapping and imports in a clean venv."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

from support.wheel import InstalledWheel


def test_a_wheel_built_from_the_repo_imports_in_a_clean_virtualenv(
    installed_wheel: InstalledWheel, tmp_path: Path
) -> None:
    names = zipfile.ZipFile(installed_wheel.wheel).namelist()
    for module in ("loopstate/__init__.py", "loopstate/engine/core.py",
                   "loopstate/machines/agent/loop.py", "loopstate/tools/decorator.py",
                   "loopstate/cli/__init__.py", "loopstate/py.typed"):  # fmt: skip
        assert module in names, module
    assert not any(n.startswith(("engine/", "tools/", "machines/", "tests/")) for n in names)

    # The dependencies come from this interpreter's site-packages (no network); loopstate
    # itself only from the wheel.
    code = (
        "import loopstate, loopstate.engine.core, loopstate.machines, loopstate.cli;"
        "print(loopstate.__file__); print(len(loopstate.__all__))"
    )
    out = subprocess.run(
        [installed_wheel.bin / "python", "-c", code],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.split()  # fmt: skip
    assert out[0].startswith(str(installed_wheel.env))
    assert int(out[1]) > 10
