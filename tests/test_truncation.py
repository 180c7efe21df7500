"""The one truncation policy for tool results: head and tail kept, a note saying what was cut."""

from __future__ import annotations

import pytest

from loopstate.engine.executor import truncate as executor_truncate
from loopstate.engine.truncation import NOTE_ROOM, HeadTail, truncate

NUMBERED = "".join(f"line {n}\n" for n in range(1, 2001))  # 2,000 lines, 18,893 characters


def test_a_text_within_the_limit_is_unchanged() -> None:
    assert truncate(NUMBERED, len(NUMBERED)) == NUMBERED
    assert truncate("", 0) == ""


def test_a_long_text_keeps_whole_first_and_last_lines_and_names_the_lines_cut() -> None:
    out = truncate(NUMBERED, 1000)
    head, rest = out.split("\n[truncated: ")  # the head's own last newline goes with it
    note, tail = rest.split("\n", 1)
    assert head.startswith("line 1\nline 2\n")
    assert tail.endswith("line 1999\nline 2000\n")
    first_cut = int(head.splitlines()[-1].split()[1]) + 1
    last_cut = int(tail.splitlines()[0].split()[1]) - 1
    cut = len(NUMBERED) - len(head) - 1 - len(tail)
    assert note == (
        f"{cut:,} of 18,893 characters cut here (lines {first_cut:,}–{last_cut:,} of 2,000)]"
    )


@pytest.mark.parametrize("limit", [NOTE_ROOM * 2, 1000, 5000, 18_000])
def test_a_truncated_text_fits_its_limit_note_included(limit: int) -> None:
    assert len(truncate(NUMBERED, limit)) <= limit
    assert len(truncate("y" * 50_000, limit)) <= limit


def test_one_long_line_is_cut_inside_it_and_its_end_is_kept() -> None:
    out = truncate("a" * 10_000 + "Z", 1000)
    assert out.startswith("aaa")
    assert out.endswith("aaaZ")
    assert "characters cut here within line 1]" in out


def test_text_fed_in_pieces_truncates_exactly_like_the_whole_text() -> None:
    for size in (1, 7, 4096):
        stream = HeadTail(1000)
        for start in range(0, len(NUMBERED), size):
            stream.add(NUMBERED[start : start + size])
        assert stream.render() == truncate(NUMBERED, 1000)
        assert len(stream.head) + len(stream.tail) <= 1001  # bounded, whatever was fed


def test_the_executor_uses_this_policy() -> None:
    assert executor_truncate is truncate
