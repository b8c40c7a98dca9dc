"""Expectations: our own writes remembered until the caches show them, or a timeout passes."""

from __future__ import annotations

import pytest

from jobrelay.controller import expectations
from jobrelay.controller.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(expectations.time, "monotonic", fake)
    return fake


def test_pending_until_observed(clock: Clock) -> None:
    expected = Expectations(timeout=30.0)
    assert not expected.pending("a")
    expected.expect("a")
    assert expected.pending("a") and len(expected) == 1
    expected.observed("a")
    expected.observed("never expected")
    assert not expected.pending("a") and len(expected) == 0


def test_pending_until_the_timeout(clock: Clock) -> None:
    expected = Expectations(timeout=30.0)
    expected.expect(("w1", "key", "uid"))
    clock.now += 29.9
    assert expected.pending(("w1", "key", "uid"))
    clock.now += 0.1
    assert not expected.pending(("w1", "key", "uid"))
    assert len(expected) == 0  # forgotten once found expired


def test_expecting_again_renews(clock: Clock) -> None:
    expected = Expectations(timeout=10.0)
    expected.expect("a")
    clock.now += 8
    expected.expect("a")
    clock.now += 8
    assert expected.pending("a")


def test_expired_entries_are_swept_when_many(clock: Clock) -> None:
    expected = Expectations(timeout=1.0)
    for index in range(expectations._SWEEP_ABOVE + 1):
        expected.expect(index)
    clock.now += 5  # all expired, none asked about since
    expected.expect("fresh")
    assert len(expected) == 1
    assert expected.pending("fresh")
