"""The wheel built from the repo, installed into a fresh virtualenv: built once per test run.

`installed_wheel()` builds the wheel (no build isolation: offline) from a copy of the
sources (the repo gets no `build/`; parallel runs never build in one folder), creates a virtualenv
without pip (this interpreter's pip installs into it with `--python`), points it at this
interpreter's site-packages for the dependencies (no network) and installs loopstate only
from the wheel. The tests use it read-only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NOT_SOURCES = shutil.ignore_patterns(
    ".*", "build", "dist", "*.egg-info", "__pycache__", "node_modules", "tests", "bench"
)


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    env: Path
    """The virtualenv's directory; its `bin/` holds `python` and the `loopstate` command."""

    @property
    def bin(self) -> Path:
        return self.env / "bin"


def installed_wheel(where: Path) -> InstalledWheel:
    """Build and install into `where`, or reuse what an earlier call installed there."""
    dist, env, ready = where / "dist", where / "venv", where / "ready"
    if ready.exists():
        (wheel,) = dist.glob("loopstate-*.whl")
        return InstalledWheel(wheel, env)
    shutil.rmtree(where, ignore_errors=True)  # a build that failed half-way
    sources = where / "sources"
    shutil.copytree(ROOT, sources, ignore=NOT_SOURCES)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(sources), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(dist)],
                   check=True, cwd=where, capture_output=True)  # fmt: skip
    (wheel,) = dist.glob("loopstate-*.whl")
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([python, "-c", purelib], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True)  # fmt: skip
    ready.touch()
    return InstalledWheel(wheel, env)
