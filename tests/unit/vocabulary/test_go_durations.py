"""Durations as Go writes them: read, and told back the same way."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.vocabulary.go_durations import go_duration_text, parse_go_duration

DURATIONS = {
    "0": 0.0, "20s": 20.0, "1h": 3600.0, "1h30m": 5400.0, "1.5h": 5400.0, "90m": 5400.0,
    "300ms": 0.3, "2h45m10s": 9910.0, "+5s": 5.0, ".5s": 0.5,
}  # fmt: skip


@pytest.mark.parametrize("text", list(DURATIONS))
def test_go_durations(text: str) -> None:
    assert parse_go_duration(text) == pytest.approx(DURATIONS[text])


@pytest.mark.parametrize("text", ["", "-1s", "1", "h", "1x", "s1", "1h-5m", "1 h"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_go_duration(text)


@given(st.integers(0, 10**7))
def test_a_duration_told_back_reads_the_same(seconds: int) -> None:
    assert parse_go_duration(go_duration_text(seconds)) == seconds


def test_a_duration_text_is_bounded() -> None:
    with pytest.raises(ValueError, match="more than 64 characters"):
        parse_go_duration("9" * 80 + "s")
