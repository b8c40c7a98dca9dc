"""The record of moves after worker-side failures, the budget and the workers avoided."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import NOW, SETTINGS, job, snapshot

from jobrelay.controller.relay.steps.worker_failures import (
    MAX_RECORDED,
    FailedOn,
    _epoch_seconds,
    avoided_workers,
    moves_allowed,
    recorded_failures,
    with_failure,
)
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import MAX_MOVES_ANNOTATION, WORKER_FAILURES_ANNOTATION
from jobrelay.vocabulary.timestamps import rfc3339


def annotated(**annotations: str) -> JsonObj:
    return job(annotations=annotations)


def test_the_record_reads_back_what_is_written_oldest_first() -> None:
    obj = annotated()
    first = with_failure(obj, "w-1", "2026-03-01T12:00:00Z")
    obj = annotated(**{WORKER_FAILURES_ANNOTATION: first})
    second = with_failure(obj, "w-2", "2026-03-01T12:01:00Z")
    assert recorded_failures(annotated(**{WORKER_FAILURES_ANNOTATION: second})) == (
        FailedOn("w-1", "2026-03-01T12:00:00Z"),
        FailedOn("w-2", "2026-03-01T12:01:00Z"),
    )


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("", ()),
        ("w-1", ()),
        ("w-1@yesterday", ()),
        ("W_1@2026-03-01T12:00:00Z", ()),
        ("w-1@2026-03-01T12:00:00Z, junk ,w-2@2026-03-01T12:01:00Z", ("w-1", "w-2")),
    ],
)
def test_entries_not_of_jobrelay_s_shape_are_left_out(text: str, read: tuple[str, ...]) -> None:
    found = recorded_failures(annotated(**{WORKER_FAILURES_ANNOTATION: text}))
    assert tuple(f.cluster for f in found) == read


@given(st.text(max_size=3000))
def test_any_text_reads_as_a_bounded_record(text: str) -> None:
    assert len(recorded_failures(annotated(**{WORKER_FAILURES_ANNOTATION: text}))) <= MAX_RECORDED


def test_the_record_is_bounded() -> None:
    many = ",".join(f"w-{i}@2026-03-01T12:00:00Z" for i in range(MAX_RECORDED + 10))
    obj = annotated(**{WORKER_FAILURES_ANNOTATION: many})
    assert len(with_failure(obj, "w-x", NOW).split(",")) == MAX_RECORDED


@pytest.mark.parametrize(
    ("value", "limit", "noted"),
    [(None, 3, False), ("0", 0, False), (" 7 ", 7, False), ("-1", 3, True), ("1e3", 3, True),
     (str(MAX_RECORDED + 1), 3, True)],
)  # fmt: skip
def test_the_budget_is_the_annotation_s_else_the_default(
    value: str | None, limit: int, noted: bool
) -> None:
    obj = annotated() if value is None else annotated(**{MAX_MOVES_ANNOTATION: value})
    allowed = moves_allowed(obj, 3)
    assert allowed.limit == limit
    assert bool(allowed.note) is noted


def test_workers_are_avoided_for_the_window_only() -> None:
    text = "w-old@2026-03-01T11:00:00Z,w-new@2026-03-01T12:09:00Z"
    obj = annotated(**{WORKER_FAILURES_ANNOTATION: text})
    s = snapshot(obj)
    assert set(avoided_workers(s, obj)) == {"w-new"}
    never = dataclasses.replace(
        s, settings=dataclasses.replace(SETTINGS, failed_worker_avoid_for=0)
    )
    assert avoided_workers(never, obj) == {}


@given(
    st.datetimes(min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(9999, 1, 1))
)
def test_times_are_read_as_the_calendar_says(moment: datetime.datetime) -> None:
    aware = moment.replace(microsecond=0, tzinfo=datetime.UTC)
    assert _epoch_seconds(rfc3339(aware)) == int(aware.timestamp())


@pytest.mark.parametrize("text", ["2026-13-01T00:00:00Z", "2026-03-01T12:00:00", "soon", ""])
def test_other_texts_are_no_time(text: str) -> None:
    assert _epoch_seconds(text) is None
