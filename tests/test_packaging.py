"""A wheel built from the repo carries the folder mapping and imports in a clean venv."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_wheel_built_from_the_repo_imports_in_a_clean_virtualenv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(dist)],
        check=True,
        cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = dist.glob("loopstate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("loopstate/__init__.py", "loopstate/engine/core.py",
                   "loopstate/machines/agent/loop.py", "loopstate/tools/decorator.py",
                   "loopstate/cli/__init__.py", "loopstate/py.typed"):  # fmt: skip
        assert module in names, module
    assert not any(n.startswith(("engine/", "tools/", "machines/", "tests/")) for n in names)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The dependencies come from this interpreter's site-packages (no network); loopstate
    # itself only from the wheel.
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True
    )
    code = (
        "import loopstate, loopstate.engine.core, loopstate.machines, loopstate.cli;"
        "print(loopstate.__file__); print(len(loopstate.__all__))"
    )
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split()
    assert out[0].startswith(str(env_dir))
    assert int(out[1]) > 10
