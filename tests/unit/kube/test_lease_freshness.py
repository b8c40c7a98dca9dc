"""Whether a reader (the CLI) sees a controller leading: fresh, stale, absent or unknown,
from a Lease read at ``now`` against the reader's wall clock, with slack for clock skew."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kube.election.election_rules import (
    CLOCK_SKEW_GRACE_SECONDS,
    DEFAULT_LEASE_SECONDS,
    LeaseState,
    lease_freshness,
    micro_time,
)

NOW = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def lease(holder: str = "pod-a", ago: float | None = 0.0, seconds: Any = 15) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "leaseDurationSeconds": seconds}
    if ago is not None:
        spec["renewTime"] = micro_time(NOW - timedelta(seconds=ago))
    return {"metadata": {"name": "jobrelay-relay", "namespace": "jobrelay-system"}, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "readable", "state", "holder", "expired_for"),
    [
        (None, True, LeaseState.ABSENT, "", 0.0),  # 404: no controller ever ran here
        (None, False, LeaseState.UNKNOWN, "", 0.0),  # 403: may not read Leases
        (lease(ago=0), True, LeaseState.FRESH, "pod-a", 0.0),
        (lease(ago=15), True, LeaseState.FRESH, "pod-a", 0.0),  # expires just now
        (lease(ago=15 + CLOCK_SKEW_GRACE_SECONDS), True, LeaseState.FRESH, "pod-a", 0.0),
        (lease(ago=300), True, LeaseState.STALE, "pod-a", 285.0),  # expired 285 s ago
        (lease(ago=-60), True, LeaseState.FRESH, "pod-a", 0.0),  # the leader's clock runs ahead
        (lease(holder="", ago=2), True, LeaseState.STALE, "", 2.0),  # released on stop
        (lease(ago=None), True, LeaseState.STALE, "pod-a", 0.0),  # held, no renewTime
        (lease(ago=20, seconds=None), True, LeaseState.FRESH, "pod-a", 0.0),  # default 15 s
        (lease(ago=60, seconds=None), True, LeaseState.STALE, "pod-a", 45.0),
        (lease(ago=60, seconds=3600), True, LeaseState.FRESH, "pod-a", 0.0),
        (lease(ago=60, seconds="junk"), True, LeaseState.STALE, "pod-a", 45.0),
        ({"spec": {"holderIdentity": "x", "renewTime": "yesterday"}}, True, LeaseState.STALE,
         "x", 0.0),
        ({"spec": {"holderIdentity": "x", "renewTime": "2026-11-28T11:00:00"}}, True,
         LeaseState.STALE, "x", 0.0),  # no zone: not a MicroTime
        ({}, True, LeaseState.STALE, "", 0.0),  # an empty Lease: nobody holds it
    ],
)  # fmt: skip
def test_freshness_table(
    obj: dict[str, Any] | None, readable: bool, state: LeaseState, holder: str, expired_for: float
) -> None:
    found = lease_freshness(obj, NOW, readable=readable)
    assert (found.state, found.holder) == (state, holder)
    assert found.expired_for == pytest.approx(expired_for, abs=1e-3)


def test_a_stale_lease_says_when_it_was_last_renewed() -> None:
    found = lease_freshness(lease(ago=300), NOW)
    assert found.renewed_at == NOW - timedelta(seconds=300)


def test_an_acquired_never_renewed_lease_counts_from_its_acquire_time() -> None:
    obj = lease(ago=None)
    obj["spec"]["acquireTime"] = micro_time(NOW - timedelta(seconds=100))
    found = lease_freshness(obj, NOW)
    assert found.state is LeaseState.STALE
    assert found.expired_for == pytest.approx(100 - DEFAULT_LEASE_SECONDS, abs=1e-3)


@given(
    ago=st.floats(min_value=-3600, max_value=10 * 86400, allow_nan=False),
    seconds=st.integers(min_value=1, max_value=3600),
    holder=st.text(min_size=1, max_size=40),
)
def test_stale_exactly_when_past_the_duration_and_the_grace(
    ago: float, seconds: int, holder: str
) -> None:
    found = lease_freshness(lease(holder=holder, ago=ago, seconds=seconds), NOW)
    # renewTime is written to the microsecond: compare with the same rounding
    renewed = datetime.fromisoformat(micro_time(NOW - timedelta(seconds=ago)))
    late = (NOW - renewed).total_seconds() - seconds
    assert found.holder == holder
    if late > CLOCK_SKEW_GRACE_SECONDS:
        assert found.state is LeaseState.STALE
        assert found.expired_for == pytest.approx(late)
    else:
        assert found.state is LeaseState.FRESH
        assert found.expired_for == 0.0


@given(
    spec=st.dictionaries(
        st.sampled_from(["holderIdentity", "leaseDurationSeconds", "renewTime", "acquireTime"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=30), st.floats(allow_nan=True)),
    ),
    readable=st.booleans(),
)
def test_any_lease_gets_a_verdict_and_never_raises(spec: dict[str, Any], readable: bool) -> None:
    found = lease_freshness({"spec": spec}, NOW, readable=readable)
    if readable:
        assert found.state in (LeaseState.FRESH, LeaseState.STALE)
    else:
        assert found.state is LeaseState.UNKNOWN
    assert found.expired_for >= 0.0
