"""Loggers for the library. loopstate never configures logging: it only gets loggers and binds.

If the application has not configured structlog, structlog's default would print every debug
line to stdout, which would corrupt the output of programs built on loopstate; so until the
application configures structlog, loopstate's own lines go to stderr from WARNING up.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def get_logger(name: str = "loopstate") -> Any:
    import structlog  # on first use: importing it costs ~0.1 s, `import loopstate` need not pay

    if structlog.is_configured():
        return structlog.get_logger(name)
    return structlog.wrap_logger(
        structlog.PrintLogger(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_name=name,
    )
