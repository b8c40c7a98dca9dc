"""What tenants and workers wrote never drives the user's terminal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.cli.terminal import LINE_LIMIT, safe, safe_lines


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, ünïcode ok", "plain text, ünïcode ok"),
        ("\x1b]0;owned\x07title", "\\x1b]0;owned\\x07title"),
        ("\x1b[2J\x1b[Hclear", "\\x1b[2J\\x1b[Hclear"),
        ("a\nb\tc\rd", "a\\x0ab\\x09c\\x0dd"),
        ("\x9b31m", "\\x9b31m"),
        ("team-\u202eb-maet", "team-\\u202eb-maet"),
        ("\u2066x\u2069", "\\u2066x\\u2069"),
    ],
)
def test_control_and_bidi_characters_are_shown_as_escapes(text: str, shown: str) -> None:
    assert safe(text) == shown


def test_a_long_line_is_cut_with_what_was_left_out() -> None:
    line = safe("x" * (LINE_LIMIT + 10))
    assert line.startswith("x" * LINE_LIMIT)
    assert line.endswith("… (10 more characters)")


def test_lines_are_made_safe_one_by_one() -> None:
    assert list(safe_lines(["a\x1b", "b"])) == ["a\\x1b", "b"]


@given(st.text(), st.integers(1, 200))
def test_no_line_holds_a_control_character_or_grows_without_bound(text: str, limit: int) -> None:
    line = safe(text, limit)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line)
    assert not any(c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069" for c in line)
    assert len(line) <= 10 * limit + 40  # each kept character escapes to at most 6
