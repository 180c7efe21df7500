"""Shared fixtures. Test helper modules in this folder import by name (see sys.path below)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
