"""A strict unified-diff parser: every context and removed line must match, or nothing applies."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loopstate.tools.builtin.workspace import ToolError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    lines: list[str] = field(default_factory=list)


@dataclass
class FileChange:
    path: str
    creates: bool
    deletes: bool
    hunks: list[Hunk] = field(default_factory=list)

    def apply(self, before: str) -> str | None:
        """The file's new text (None when the patch deletes it)."""
        if self.deletes:
            return None
        old = before.splitlines(keepends=True)
        out: list[str] = []
        cursor = 0
        for hunk in self.hunks:
            start = max(hunk.old_start - 1, 0)
            if start < cursor:
                raise ToolError(f"{self.path}: hunks overlap or are out of order")
            out.extend(old[cursor:start])
            cursor = start
            for line in hunk.lines:
                tag, body = line[:1], line[1:]
                if tag in (" ", "-"):
                    if cursor >= len(old) or old[cursor].rstrip("\r\n") != body.rstrip("\r\n"):
                        raise ToolError(
                            f"{self.path}: the patch does not match line {cursor + 1}; "
                            "nothing was changed"
                        )
                    if tag == " ":
                        out.append(old[cursor])
                    cursor += 1
                elif tag == "+":
                    out.append(body if body.endswith("\n") else body + "\n")
        out.extend(old[cursor:])
        return "".join(out)


def parse_patch(text: str) -> list[FileChange]:
    changes: list[FileChange] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise ToolError(f"line {i + 2}: expected '+++' after '---'")
        old, new = _name(lines[i][4:]), _name(lines[i + 1][4:])
        change = FileChange(
            path=new if new is not None else old or "",
            creates=old is None,
            deletes=new is None,
        )
        i += 2
        while i < len(lines) and not lines[i].startswith("--- "):
            match = _HUNK.match(lines[i])
            if match:
                change.hunks.append(Hunk(old_start=int(match.group(1))))
            elif change.hunks and lines[i][:1] in (" ", "+", "-"):
                change.hunks[-1].lines.append(lines[i] + "\n")
            elif change.hunks and lines[i] == "":
                change.hunks[-1].lines.append(" \n")  # a blank context line lost its space
            i += 1
        if not change.path:
            raise ToolError("a file in the patch has no name")
        changes.append(change)
    if not changes:
        raise ToolError("no file changes found: send a unified diff with ---/+++ headers")
    return changes


def _name(header: str) -> str | None:
    name = header.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name
