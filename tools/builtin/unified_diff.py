"""A strict unified-diff parser and applier: every context and removed line must match.

Hunks are read by the line counts in their `@@` headers (so a removed line that starts with
`-- ` is not mistaken for a file header). A hunk may sit at another line than its header says,
as with `patch`'s offsets: the nearest place where all its old lines match exactly is used.
Nothing is written here; `patch_tool` applies every file in memory first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loopstate.tools.builtin.file_access import split_lines
from loopstate.tools.builtin.workspace import ToolError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\"  # "\ No newline at end of file"


@dataclass
class Hunk:
    header: str
    old_start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    new_lacks_newline: bool = False
    old_lacks_newline: bool = False


@dataclass
class FileChange:
    """One file's section: `source` is None when it is created, `path` None when deleted."""

    source: str | None
    path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path or self.source or "?"

    def apply(self, before: str) -> str:
        """The file's text after every hunk, or a `ToolError` naming the hunk that failed."""
        lines = split_lines(before)
        crlf = bool(lines) and lines[0].endswith("\r")
        ends_with_newline = before.endswith("\n") or not before
        out: list[str] = []
        cursor = 0
        for number, hunk in enumerate(self.hunks, 1):
            at = self._locate(hunk, lines, cursor, number)
            out.extend(lines[cursor:at])
            out.extend(line + "\r" if crlf else line for line in hunk.new)
            cursor = at + len(hunk.old)
            if hunk.new_lacks_newline:
                ends_with_newline = False
            elif hunk.old_lacks_newline:
                ends_with_newline = True
        out.extend(lines[cursor:])
        text = "\n".join(out)
        return text + "\n" if out and ends_with_newline else text

    def _locate(self, hunk: Hunk, lines: list[str], cursor: int, number: int) -> int:
        # An insertion-only hunk (`-3,0`) goes after line 3; any other starts at line 3.
        expected = hunk.old_start if not hunk.old else hunk.old_start - 1
        if not hunk.old:
            return min(max(expected, cursor), len(lines))
        wanted = [line.rstrip("\r") for line in hunk.old]
        places = [
            at
            for at in range(cursor, len(lines) - len(wanted) + 1)
            if [line.rstrip("\r") for line in lines[at : at + len(wanted)]] == wanted
        ]
        if not places:
            raise ToolError(
                f"{self.name}: hunk {number} ({hunk.header}) does not match the file: its "
                f"context and removed lines were not found after line {cursor}; read the file "
                "again and resend the patch. Nothing was changed"
            )
        return min(places, key=lambda at: abs(at - expected))


def parse_patch(text: str) -> list[FileChange]:
    """The file sections of a unified diff (git's extra header lines are ignored)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    changes: list[FileChange] = []
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("--- ") and i + 1 < len(lines)):
            i += 1
            continue
        if not lines[i + 1].startswith("+++ "):
            raise ToolError(f"patch line {i + 2}: expected '+++ ' after '--- '")
        change = FileChange(source=_name(lines[i][4:]), path=_name(lines[i + 1][4:]))
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            hunk, i = _parse_hunk(lines, i, change.name)
            change.hunks.append(hunk)
        if i < len(lines) and lines[i][:1] in (" ", "+", "-") and not _is_header(lines, i):
            raise ToolError(
                f"{change.name}: patch line {i + 1} follows a hunk but its header does not "
                "count it: fix the @@ line counts"
            )
        _check(change)
        changes.append(change)
    if not changes:
        raise ToolError("no file changes found: send a unified diff with ---/+++ headers")
    return changes


def _parse_hunk(lines: list[str], i: int, name: str) -> tuple[Hunk, int]:
    match = _HUNK.match(lines[i])
    if match is None:
        raise ToolError(f"{name}: patch line {i + 1} is not a hunk header like '@@ -1,3 +1,4 @@'")
    hunk = Hunk(header=match.group(0), old_start=int(match.group(1)))
    old_left = int(match.group(2) or 1)
    new_left = int(match.group(4) or 1)
    i += 1
    last = ""
    while old_left or new_left or (i < len(lines) and lines[i].startswith(_NO_NEWLINE)):
        line = lines[i] if i < len(lines) else None
        tag, body = (line[:1], line[1:]) if line else (" ", "")  # "" is a blank context line
        if line is None or tag not in (" ", "-", "+", _NO_NEWLINE):
            raise ToolError(
                f"{name}: {hunk.header} ends at patch line {i + 1} but its header counts "
                f"{old_left} more old and {new_left} more new lines"
            )
        if tag == _NO_NEWLINE:
            hunk.old_lacks_newline |= last in (" ", "-")
            hunk.new_lacks_newline |= last in (" ", "+")
        if tag in (" ", "-"):
            hunk.old.append(body)
            old_left -= 1
        if tag in (" ", "+"):
            hunk.new.append(body)
            new_left -= 1
        if old_left < 0 or new_left < 0:
            raise ToolError(f"{name}: {hunk.header} has more lines than its header counts")
        last = tag
        i += 1
    return hunk, i


def _check(change: FileChange) -> None:
    if change.source is None and change.path is None:
        raise ToolError("a file in the patch goes from /dev/null to /dev/null")
    if not change.hunks and change.source is not None and change.path is not None:
        raise ToolError(f"{change.name}: the patch has no hunks for it")


def _is_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _name(header: str) -> str | None:
    name = header.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name
