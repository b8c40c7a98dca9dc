"""The one timestamp format: Kubernetes Time and MicroTime, in UTC."""

from __future__ import annotations

import datetime
import re

import pytest

from jobrelay.vocabulary.timestamps import micro_time, parse_time, rfc3339, seconds_since, utc_now

MOMENT = datetime.datetime(2026, 11, 28, 15, 4, 5, 123456, tzinfo=datetime.UTC)


def test_times_are_written_in_utc_to_the_second_or_the_microsecond() -> None:
    assert rfc3339(MOMENT) == "2026-11-28T15:04:05Z"
    assert rfc3339(MOMENT.timestamp()) == "2026-11-28T15:04:05Z"
    east = MOMENT.astimezone(datetime.timezone(datetime.timedelta(hours=9)))
    assert rfc3339(east) == "2026-11-28T15:04:05Z"
    assert micro_time(east) == "2026-11-28T15:04:05.123456Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_now())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-28T15:04:00Z", 5.123456),
        ("2026-11-28T15:04:05.123456Z", 0.0),
        ("not a time", None),
        ("2026-11-28T15:04:00", None),  # no zone: not an RFC 3339 time
    ],
)
def test_seconds_since_reads_what_it_writes(text: str, expected: float | None) -> None:
    found = seconds_since(text, MOMENT)
    assert found == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("2026-11-28T20:00:00Z", datetime.datetime(2026, 11, 28, 20, tzinfo=datetime.UTC)),
        (
            "2026-11-28T20:00:00.250000Z",
            datetime.datetime(2026, 11, 28, 20, 0, 0, 250000, tzinfo=datetime.UTC),
        ),
        ("2026-11-28T20:00:00", None),  # no zone: not a Kubernetes time
        ("yesterday", None),
        (42, None),
        ("2026-11-28T20:00:00Z" + " " * 100, None),  # longer than any time
    ],
)
def test_parse_time(value: object, parsed: datetime.datetime | None) -> None:
    assert parse_time(value) == parsed
