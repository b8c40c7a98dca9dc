"""The record of moves after worker-side failures, their ages, the budget and the workers
avoided."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import NOW, SETTINGS, job, snapshot

from jobrelay.controller.relay.steps.worker_failures import avoided_workers, moves_allowed
from jobrelay.vocabulary.failure_ages import worker_failure_ages
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import MAX_MOVES_ANNOTATION, WORKER_FAILURES_ANNOTATION
from jobrelay.vocabulary.placement import (
    MAX_RECORDED_FAILURES,
    FailedOn,
    with_worker_failure,
    worker_failures_of,
)


def annotated(**annotations: str) -> JsonObj:
    return job(annotations=annotations)


def test_the_record_reads_back_what_is_written_oldest_first() -> None:
    first = with_worker_failure(annotated(), "w-1", "2026-03-01T12:00:00Z")
    obj = annotated(**{WORKER_FAILURES_ANNOTATION: first})
    second = with_worker_failure(obj, "w-2", "2026-03-01T12:01:00Z")
    assert worker_failures_of(annotated(**{WORKER_FAILURES_ANNOTATION: second})) == (
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
    found = worker_failures_of(annotated(**{WORKER_FAILURES_ANNOTATION: text}))
    assert tuple(f.cluster for f in found) == read


@given(st.text(max_size=3000))
def test_any_text_reads_as_a_bounded_record(text: str) -> None:
    found = worker_failures_of(annotated(**{WORKER_FAILURES_ANNOTATION: text}))
    assert len(found) <= MAX_RECORDED_FAILURES


def test_the_record_is_bounded() -> None:
    many = ",".join(f"w-{i}@2026-03-01T12:00:00Z" for i in range(MAX_RECORDED_FAILURES + 10))
    obj = annotated(**{WORKER_FAILURES_ANNOTATION: many})
    assert len(with_worker_failure(obj, "w-x", NOW).split(",")) == MAX_RECORDED_FAILURES


def test_ages_are_read_with_the_clock_the_caller_gives_the_latest_per_worker() -> None:
    text = "w-1@2026-03-01T11:00:00Z,w-2@2026-03-01T12:09:00Z,w-1@2026-03-01T12:05:00Z"
    obj = annotated(**{WORKER_FAILURES_ANNOTATION: text})
    assert worker_failure_ages(obj, NOW) == {"w-1": 300.0, "w-2": 60.0}
    assert worker_failure_ages(annotated(), NOW) == {}
    assert worker_failure_ages(obj, "not a time") == {}


@pytest.mark.parametrize(
    ("value", "limit", "noted"),
    [(None, 3, False), ("0", 0, False), (" 7 ", 7, False), ("-1", 3, True), ("1e3", 3, True),
     (str(MAX_RECORDED_FAILURES + 1), 3, True), ("9" * 100_000, 3, True)],
)  # fmt: skip
def test_the_budget_is_the_annotation_s_else_the_default(
    value: str | None, limit: int, noted: bool
) -> None:
    obj = annotated() if value is None else annotated(**{MAX_MOVES_ANNOTATION: value})
    allowed = moves_allowed(obj, 3)
    assert allowed.limit == limit
    assert bool(allowed.note) is noted
    assert len(allowed.note) < 200


def test_workers_are_avoided_for_the_window_only() -> None:
    text = "w-old@2026-03-01T11:00:00Z,w-new@2026-03-01T12:09:00Z"
    s = snapshot(annotated(**{WORKER_FAILURES_ANNOTATION: text}))
    assert avoided_workers(s) == {
        "w-new": "the workload moved away from it after a worker-side failure 60s ago"
    }
    never = dataclasses.replace(
        s, settings=dataclasses.replace(SETTINGS, failed_worker_avoid_for=0)
    )
    assert avoided_workers(never) == {}
