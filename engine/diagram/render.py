"""SVG and PNG through Graphviz's `dot` program (argv, never a shell string; with a timeout)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Literal

from loopstate.engine.errors import LoopstateError


class GraphvizNotFound(LoopstateError):
    """Graphviz's `dot` program is not installed."""


class GraphvizFailed(LoopstateError):
    """`dot` rejected its input or did not finish."""


def render(dot_text: str, fmt: Literal["svg", "png"] = "svg", *, timeout: float = 30) -> bytes:
    program = shutil.which("dot")
    if program is None:
        raise GraphvizNotFound(
            "SVG and PNG need Graphviz's `dot` program, which is not on PATH: install Graphviz "
            "(e.g. `apt-get install graphviz` or `brew install graphviz`), or use "
            "--format mermaid / dot"
        )
    try:
        done = subprocess.run(
            [program, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise GraphvizFailed(f"dot did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        raise GraphvizFailed(f"dot failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout
