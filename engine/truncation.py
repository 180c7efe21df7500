"""The one policy for cutting a long tool result: keep its start and its end, say what is gone.

The end of a tool's output usually holds what matters most (the error, the summary line), so a
result over its limit keeps a head and a tail, cut at line boundaries where one is near, with
a note in between saying how many characters were cut and which lines they were:

    ...first lines...
    [truncated: 70,012 of 90,012 characters cut here (lines 201–1,800 of 2,000)]
    ...last lines...

The whole result, note included, stays within the limit (for limits over `NOTE_ROOM`).
`HeadTail` applies the same policy to a stream read in pieces (a command's output) in bounded
memory; `truncate` applies it to a string.
"""

from __future__ import annotations

NOTE_ROOM = 160
"""Characters kept free for the note and its line breaks (the longest note is ~130)."""


class HeadTail:
    """The first and last characters of a text fed in pieces, and how long it was in all.

    Holds at most `limit + 1` characters whatever is fed; `render()` gives what
    `truncate(whole_text, limit)` would.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head_room = max(limit - NOTE_ROOM, 0) // 2
        self.tail_room = max(limit - NOTE_ROOM, 0) - self.head_room
        self.head = ""
        self.tail = ""  # the last characters after the head: enough for the whole text up to
        # `limit`, and otherwise one more than the tail shown (to tell where the cut ends)
        self.chars = 0
        self.newlines = 0

    def add(self, piece: str) -> HeadTail:
        self.chars += len(piece)
        self.newlines += piece.count("\n")
        room = self.head_room - len(self.head)
        if room > 0:
            self.head += piece[:room]
            piece = piece[room:]
        if piece:
            keep = self.limit - self.head_room + 1
            self.tail = (self.tail[-keep:] + piece)[-keep:]
        return self

    def render(self) -> str:
        """The text, or its head and tail with the note when it is longer than the limit."""
        if self.chars <= self.limit:
            return self.head + self.tail
        head = _cut_after_last_newline(self.head)
        tail = self.tail[len(self.tail) - self.tail_room :] if self.tail_room else ""
        tail = _cut_before_first_newline(tail)
        cut_ends_a_line = self.tail[-len(tail) - 1] == "\n"
        note = self._note(head, tail, cut_ends_a_line=cut_ends_a_line)
        joint = "" if not head or head.endswith("\n") else "\n"
        return f"{head}{joint}{note}\n{tail}" if tail else f"{head}{joint}{note}"

    def _note(self, head: str, tail: str, *, cut_ends_a_line: bool) -> str:
        cut = self.chars - len(head) - len(tail)
        lines = self.newlines + (0 if self.tail.endswith("\n") else 1)
        first = head.count("\n") + 1
        last = self.newlines - tail.count("\n") + (0 if cut_ends_a_line else 1)
        where = (
            f"within line {first:,}"
            if first == last
            else f"(lines {first:,}–{last:,} of {lines:,})"
        )
        return f"[truncated: {cut:,} of {self.chars:,} characters cut here {where}]"


def truncate(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters; otherwise its head and tail with a note,
    `limit` characters in all."""
    if len(text) <= limit:
        return text
    return HeadTail(limit).add(text).render()


def _cut_after_last_newline(head: str) -> str:
    at = head.rfind("\n", len(head) // 2)
    return head[: at + 1] if at >= 0 else head


def _cut_before_first_newline(tail: str) -> str:
    at = tail.find("\n", 0, len(tail) // 2)
    return tail[at + 1 :] if at >= 0 else tail
