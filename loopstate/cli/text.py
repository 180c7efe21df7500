"""`shown`: text a model, a tool or a stored file chose, made safe to print in a terminal.

Every character that could act on the terminal or hide what follows it (ANSI escapes and
other controls, newlines, bidirectional overrides, zero-width characters, lone surrogates)
is printed as a visible escape such as `\\x1b`, `\\n` or `\\u202e`: a person deciding on a call
sees all of it, and nothing a model wrote can redraw the screen or forge a line.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

# Cc controls, Cf format (bidi overrides, zero-width), Zl/Zp line and paragraph separators,
# Cs lone surrogates, Co private use (fonts may draw them as anything).
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(value: object) -> str:
    """`str(value)` with every control or invisible character written as an escape."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _HIDDEN else c for c in text)


def shown_json(value: Any) -> str:
    """`value` as one line of JSON, readable in any script, with nothing hidden."""
    return shown(json.dumps(value, ensure_ascii=False, default=str))


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
