"""How to name this command in a hint so that typing it works: `loopstate` when that is
what the shell finds, else the path this one was started from, else `python -m loopstate`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def command_prefix(argv0: str | None = None) -> str:
    """The words that start this command again from a shell in the working directory."""
    started = Path(argv0 if argv0 is not None else sys.argv[0])
    if started.name in ("__main__.py", "-m", "-c") or started.suffix == ".py":
        return f"{_shortest(Path(sys.executable))} -m loopstate"
    on_path = shutil.which("loopstate")
    if on_path is not None and Path(on_path).resolve() == started.resolve():
        return "loopstate"
    return _shortest(started)


def _shortest(path: Path) -> str:
    """`path` relative to the working directory when it is under it, else absolute."""
    absolute = path if path.is_absolute() else Path.cwd() / path
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
