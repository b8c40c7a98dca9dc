"""The outcome vocabulary: what a queue handler answers, and the name each is counted by."""

from __future__ import annotations

import pytest

from jobrelay.vocabulary.outcome import (
    Done,
    Lane,
    QueueOutcome,
    RequeueAfter,
    Retry,
    Terminal,
    result,
)


@pytest.mark.parametrize(
    ("outcome", "name"),
    [
        (Done(), "done"),
        (RequeueAfter(1.0), "requeue"),
        (RequeueAfter(15.0, Lane.BACKGROUND), "requeue"),
        (Retry("conflict"), "retry"),
        (Terminal("MirrorRejected", "rejected", retry_after=30.0, detail="quota"), "terminal"),
        (Terminal("StatusNotCopied", "a bug"), "terminal"),
    ],
)
def test_each_outcome_is_counted_by_its_own_name(outcome: QueueOutcome, name: str) -> None:
    assert result(outcome) == name


def test_outcomes_are_values() -> None:
    assert Done() == Done()
    assert RequeueAfter(2.0) != RequeueAfter(2.0, Lane.STATUS)
    assert RequeueAfter(2.0).lane is None  # the lane the key was handed out at
    assert Terminal("R", "m").retry_after is None and Terminal("R", "m").detail == ""


def test_lanes_are_served_best_first() -> None:
    assert sorted([Lane.BACKGROUND, Lane.FRESH, Lane.STATUS]) == [
        Lane.FRESH,
        Lane.STATUS,
        Lane.BACKGROUND,
    ]
