"""The pure Lease decisions: tables for each case, and a simulated election (hypothesis).

The simulation runs two or three candidates against one Lease store with the
elector's algorithm (read, ``observe``, ``decide``, compare-and-swap write,
``leading_until``; the leader's renewal from its own last write; tries abandoned
at the renew deadline; crashes, clean stops with a release, lost and delayed
answers, and every candidate's monotonic clock offset from the others'). Its
property: no two candidates ever believe they lead at the same moment.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobrelay.kube.election.election_rules import (
    RETRY_JITTER,
    Acquire,
    ElectionTiming,
    LeaseRecord,
    Observation,
    Wait,
    decide,
    leading_until,
    lease_body,
    micro_time,
    observe,
    released,
)

TIMING = ElectionTiming(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
WALL = datetime(2030, 5, 17, 8, 30, 1, 123456, tzinfo=UTC)
STAMP = "2030-05-17T08:30:01.123456Z"
OLD = "2030-05-17T08:00:00.000000Z"


def lease(holder: str, *, seconds: int = 15, transitions: int = 3, rv: str = "7") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "jobrelay-relay",
            "namespace": "jobrelay-system",
            "resourceVersion": rv,
        },
        "spec": LeaseRecord(holder, seconds, OLD, OLD, transitions).spec(),
    }


# -- observe ------------------------------------------------------------------------------


def test_an_unchanged_record_keeps_the_time_it_was_first_seen() -> None:
    first = observe(None, lease("a"), 100.0)
    assert first.seen_at == 100.0 and first.record is not None and first.record.holder == "a"
    again = observe(first, lease("a", rv="8"), 130.0)
    # Same record: the holder did not renew, its lease keeps running out.
    assert again.seen_at == 100.0 and again.resource_version == "8"
    renewed = observe(
        again, {**lease("a"), "spec": {**lease("a")["spec"], "renewTime": STAMP}}, 131.0
    )
    assert renewed.seen_at == 131.0


def test_a_missing_lease_is_observed_as_none() -> None:
    gone = observe(observe(None, lease("a"), 1.0), None, 2.0)
    assert (gone.record, gone.resource_version, gone.seen_at) == (None, "", 2.0)


def test_records_read_missing_or_malformed_fields_as_empty() -> None:
    record = LeaseRecord.from_lease({"spec": {"leaseDurationSeconds": "x"}})
    assert record == LeaseRecord("", 0, None, None, 0)
    assert LeaseRecord.from_lease({}).spec() == {
        "holderIdentity": "",
        "leaseDurationSeconds": 0,
        "leaseTransitions": 0,
    }


# -- decide: one row per case ---------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    name: str
    observed: Observation
    now: float
    expected: Acquire | Wait


def seen(holder: str | None, at: float = 100.0, *, seconds: int = 15) -> Observation:
    if holder is None:
        return Observation(None, "", at)
    return Observation(LeaseRecord(holder, seconds, OLD, OLD, 3), "7", at)


ROWS = [
    Row(
        "no Lease: create it, holding it, 0 transitions",
        seen(None),
        100.0,
        Acquire(
            LeaseRecord("me", 15, STAMP, STAMP, 0), create=True, resource_version="", renewal=False
        ),
    ),
    Row(
        "ours: renew, keeping acquire time and transitions",
        seen("me"),
        200.0,
        Acquire(
            LeaseRecord("me", 15, OLD, STAMP, 3), create=False, resource_version="7", renewal=True
        ),
    ),
    Row(
        "ours even long after: renew (we are the only one who would)",
        seen("me"),
        10_000.0,
        Acquire(
            LeaseRecord("me", 15, OLD, STAMP, 3), create=False, resource_version="7", renewal=True
        ),
    ),
    Row("another's, just seen: wait its whole duration", seen("other"), 100.0, Wait("other", 15.0)),
    Row("another's, half a second before expiry: wait", seen("other"), 114.5, Wait("other", 0.5)),
    Row(
        "another's, expired by our observation: take over, transitions + 1",
        seen("other"),
        115.0,
        Acquire(
            LeaseRecord("me", 15, STAMP, STAMP, 4),
            create=False,
            resource_version="7",
            renewal=False,
        ),
    ),
    Row(
        "another's, with its own longer duration: that duration counts",
        seen("other", seconds=60),
        150.0,
        Wait("other", 10.0),
    ),
    Row(
        "another's without a duration (malformed): wait ours",
        seen("other", seconds=0),
        110.0,
        Wait("other", 5.0),
    ),
    Row(
        "released (no holder): take it at once",
        Observation(LeaseRecord("", 1, OLD, OLD, 3), "7", 100.0),
        100.0,
        Acquire(
            LeaseRecord("me", 15, STAMP, STAMP, 4),
            create=False,
            resource_version="7",
            renewal=False,
        ),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_decide(row: Row) -> None:
    assert decide(row.observed, row.now, "me", TIMING, WALL) == row.expected


def test_the_leader_may_act_until_its_renew_deadline_from_when_it_sent_the_renewal() -> None:
    assert leading_until(50.0, TIMING) == 60.0


def test_a_release_hands_the_lease_back_at_once_keeping_transitions() -> None:
    assert released(LeaseRecord("me", 15, OLD, OLD, 3), WALL) == LeaseRecord("", 1, STAMP, STAMP, 3)


def test_lease_bodies_keep_fields_they_do_not_own() -> None:
    base = lease("other")
    base["metadata"]["labels"] = {"team": "ops"}
    base["spec"]["strategy"] = "OldestEmulationVersion"
    body = lease_body(
        "jobrelay-relay", "jobrelay-system", LeaseRecord("me", 15, STAMP, STAMP, 4),
        resource_version="7", base=base,
    )  # fmt: skip
    assert body["metadata"]["labels"] == {"team": "ops"}
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["spec"] == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 4,
        "acquireTime": STAMP,
        "renewTime": STAMP,
        "strategy": "OldestEmulationVersion",
    }
    fresh = lease_body("l", "ns", LeaseRecord("me", 15, STAMP, STAMP, 0))
    assert fresh["metadata"] == {"name": "l", "namespace": "ns"}
    assert (fresh["apiVersion"], fresh["kind"]) == ("coordination.k8s.io/v1", "Lease")


def test_micro_time_is_utc_with_microseconds() -> None:
    east = WALL.astimezone(__import__("datetime").timezone(timedelta(hours=9)))
    assert micro_time(east) == STAMP


@pytest.mark.parametrize(
    ("timing", "problem"),
    [
        (ElectionTiming(15, 10, 2), None),
        (ElectionTiming(0.5, 0.3, 0.1), "at least 1 s"),
        (ElectionTiming(15, 15, 2), "shorter than the lease duration"),
        (ElectionTiming(15, 20, 2), "shorter than the lease duration"),
        (ElectionTiming(15, 10, 8.4), "shorter than the renew deadline"),
        (ElectionTiming(15, 10, 0), "positive"),
    ],
)
def test_timing_problems(timing: ElectionTiming, problem: str | None) -> None:
    found = timing.problems()
    if problem is None:
        assert found == []
    else:
        assert any(problem in text for text in found), found


def test_lease_seconds_round_up() -> None:
    assert ElectionTiming(15.2, 10, 2).lease_seconds == 16
    assert ElectionTiming(15, 10, 2).lease_seconds == 15


# -- the simulated election ---------------------------------------------------------------


class Store:
    """The apiserver's one Lease: reads, creates, compare-and-swap replaces."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.revisions = itertools.count(1)
        self.committed: list[LeaseRecord] = []

    def read(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    def write(self, body: dict[str, Any], create: bool) -> dict[str, Any] | None:
        """The stored Lease, or None for AlreadyExists / Conflict."""
        if create and self.lease is not None:
            return None
        if not create and (
            self.lease is None
            or body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]
        ):
            return None
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self.revisions))
        self.lease = stored
        self.committed.append(LeaseRecord.from_lease(stored))
        return copy.deepcopy(stored)


class Simulation:
    def __init__(self) -> None:
        self.now = 0.0
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._events, (when, next(self._order), action))

    def run(self, until: float) -> None:
        while self._events and self._events[0][0] <= until:
            self.now, _, action = heapq.heappop(self._events)
            action()


@dataclass
class Network:
    """Latencies and failures, drawn per request."""

    rng: random.Random
    timing: ElectionTiming
    slow: float  # chance that a request takes long (up to two lease durations)
    lossy: float  # chance that a request or its answer is lost

    def latency(self) -> float:
        if self.rng.random() < self.slow:
            return self.rng.uniform(0, 2 * self.timing.lease_duration)
        return self.rng.uniform(0, self.timing.retry_period / 4)

    def lost(self) -> bool:
        return self.rng.random() < self.lossy


@dataclass
class Candidate:
    """One replica running the elector's algorithm on its own monotonic clock."""

    name: str
    offset: float  # its clock minus the simulation's
    crash_at: float | None
    stop_at: float | None
    sim: Simulation
    store: Store
    net: Network
    timing: ElectionTiming
    observed: Observation | None = None
    lease: dict[str, Any] | None = None
    leading: bool = False
    until: float = -math.inf  # on its own clock
    done: bool = False
    current: int = 0  # the try it still waits for an answer to (0: none)
    beliefs: list[list[float]] = field(default_factory=list)  # [from, to] in simulation time
    tries: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def clock(self) -> float:
        return self.sim.now + self.offset

    def wall(self) -> datetime:
        return WALL + timedelta(seconds=self.sim.now)

    # -- a try: read (unless renewing), decide, write --

    def start_try(self) -> None:
        if self.done:
            return
        if self.crash_at is not None and self.sim.now >= self.crash_at:
            self.done = True  # a crashed or frozen process: its belief runs to its deadline
            return
        if self.lost_it():
            return
        if self.leading and self.stop_at is not None and self.sim.now >= self.stop_at:
            self.stop()
            return
        sent = self.clock()
        self.current = try_id = next(self.tries)
        # Every try is abandoned at the renew deadline (the elector's bound, and the
        # leader's own deadline comes earlier still).
        self.sim.at(self.sim.now + self.timing.renew_deadline, lambda: self.give_up(try_id))
        if self.leading and self.observed is not None and self.observed.record is not None:
            decision = decide(self.observed, sent, self.name, self.timing, self.wall())
            assert isinstance(decision, Acquire) and decision.renewal
            self.send_write(try_id, decision, sent, fast=True)
        else:
            self.send_read(try_id, sent)

    def send_read(self, try_id: int, sent: float) -> None:
        if self.net.lost():
            self.sim.at(self.sim.now + self.net.latency(), lambda: self.failed(try_id))
            return

        def at_server() -> None:
            snapshot = self.store.read()
            self.sim.at(
                self.sim.now + self.net.latency(), lambda: self.read(try_id, snapshot, sent)
            )

        self.sim.at(self.sim.now + self.net.latency(), at_server)

    def read(self, try_id: int, snapshot: dict[str, Any] | None, sent: float) -> None:
        if try_id != self.current or self.lost_it():
            return
        self.lease = snapshot
        self.observed = observe(self.observed, snapshot, self.clock())
        decision = decide(self.observed, self.clock(), self.name, self.timing, self.wall())
        if isinstance(decision, Wait):
            self.next_try()
            return
        self.send_write(try_id, decision, sent, fast=False)

    def send_write(self, try_id: int, decision: Acquire, sent: float, *, fast: bool) -> None:
        body = lease_body(
            "l", "ns", decision.record, resource_version=decision.resource_version,
            base=None if decision.create else self.lease,
        )  # fmt: skip
        if self.net.lost():  # lost on the way: never committed
            self.sim.at(self.sim.now + self.net.latency(), lambda: self.failed(try_id))
            return

        def at_server() -> None:
            stored = self.store.write(body, decision.create)
            answer_lost = self.net.lost()
            self.sim.at(
                self.sim.now + self.net.latency(),
                lambda: self.written(try_id, stored, sent, fast=fast, answer_lost=answer_lost),
            )

        self.sim.at(self.sim.now + self.net.latency(), at_server)

    def written(
        self,
        try_id: int,
        stored: dict[str, Any] | None,
        sent: float,
        *,
        fast: bool,
        answer_lost: bool,
    ) -> None:
        if try_id != self.current or self.lost_it():
            return
        if answer_lost:
            self.failed(try_id)
            return
        if stored is None:
            if fast:  # someone else wrote: read and decide again, in the same try
                self.send_read(try_id, sent)
            else:
                self.next_try()
            return
        self.lease = stored
        self.observed = observe(self.observed, stored, self.clock())
        until = leading_until(sent, self.timing)
        if self.clock() < until:
            if not self.leading:
                self.leading = True
                self.beliefs.append([self.sim.now, math.inf])
            self.until = until
        self.next_try()

    def failed(self, try_id: int) -> None:
        if try_id == self.current and not self.lost_it():
            self.next_try()

    def give_up(self, try_id: int) -> None:
        if try_id == self.current and not self.done and not self.lost_it():
            self.next_try()

    def next_try(self) -> None:
        self.current = 0
        period = self.timing.retry_period
        wait = period if self.leading else self.net.rng.uniform(period, period * (1 + RETRY_JITTER))
        self.sim.at(self.sim.now + wait, self.start_try)

    # -- the end of leading --

    def lost_it(self) -> bool:
        """Past its deadline while leading: it stopped acting then, and the process exits."""
        if self.leading and self.clock() >= self.until:
            self.leading = False
            self.beliefs[-1][1] = self.until - self.offset
            self.done = True
        return self.done

    def stop(self) -> None:
        """A clean stop: leading ends now, then the lease is released (compare-and-swap)."""
        self.leading = False
        self.beliefs[-1][1] = self.sim.now
        self.done = True
        assert self.observed is not None and self.observed.record is not None
        body = lease_body(
            "l", "ns", released(self.observed.record, self.wall()),
            resource_version=self.observed.resource_version, base=self.lease,
        )  # fmt: skip
        if not self.net.lost():
            self.sim.at(self.sim.now + self.net.latency(), lambda: self.store.write(body, False))

    def close(self) -> None:
        if self.leading:
            self.beliefs[-1][1] = self.until - self.offset


@st.composite
def timings(draw: st.DrawFn) -> ElectionTiming:
    lease_duration = draw(st.floats(1.0, 30.0))
    renew_deadline = draw(st.floats(0.1, 0.98)) * lease_duration
    retry_period = draw(st.floats(0.1, 0.8)) * renew_deadline / (1 + RETRY_JITTER)
    timing = ElectionTiming(lease_duration, renew_deadline, retry_period)
    # Leases count whole seconds: a fractional duration is written rounded up,
    # which only makes others wait longer.
    return timing


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    timing=timings(),
    seed=st.integers(0, 2**32),
    candidates=st.integers(2, 3),
    slow=st.sampled_from([0.0, 0.05, 0.3]),
    lossy=st.sampled_from([0.0, 0.1, 0.4]),
    data=st.data(),
)
def test_no_two_candidates_ever_believe_they_lead_at_once(
    timing: ElectionTiming,
    seed: int,
    candidates: int,
    slow: float,
    lossy: float,
    data: st.DataObject,
) -> None:
    sim, store = Simulation(), Store()
    # Latencies and losses from a seeded generator: hundreds per example.
    net = Network(random.Random(seed), timing, slow, lossy)
    horizon = 12 * timing.lease_duration
    moment = st.one_of(st.none(), st.floats(0.0, horizon))
    replicas = [
        Candidate(
            name=f"c{index}",
            offset=data.draw(st.floats(-1e6, 1e6), label=f"c{index} clock offset"),
            crash_at=data.draw(moment, label=f"c{index} crashes at"),
            stop_at=data.draw(moment, label=f"c{index} stops at"),
            sim=sim,
            store=store,
            net=net,
            timing=timing,
        )
        for index in range(candidates)
    ]
    for replica in replicas:
        sim.at(
            data.draw(st.floats(0.0, timing.lease_duration), label="starts at"), replica.start_try
        )
    sim.run(horizon)
    for replica in replicas:
        replica.close()

    beliefs = sorted(
        (start, end, replica.name) for replica in replicas for start, end in replica.beliefs
    )
    for (start_a, end_a, a), (start_b, end_b, b) in itertools.pairwise(beliefs):
        assert end_a <= start_b or a == b, (
            f"{a} led over [{start_a:.3f}, {end_a:.3f}] and {b} over [{start_b:.3f}, {end_b:.3f}]"
        )
    # Transitions count every change of holder, and nothing else.
    for before, after in itertools.pairwise(store.committed):
        if after.holder and after.holder != before.holder:
            assert after.transitions == before.transitions + 1
        else:
            assert after.transitions == before.transitions


@settings(max_examples=40, deadline=None)
@given(timing=timings(), seed=st.integers(0, 2**32))
def test_when_the_leader_crashes_a_standby_takes_over_within_a_lease_and_two_tries(
    timing: ElectionTiming, seed: int
) -> None:
    """On a network that loses nothing and is fast: the bound the e2e test measures.

    Fast means a renewal (up to half a retry period) plus the retry period fit in
    the renew deadline; otherwise the leader rightly gives up before it crashes.
    """
    assume(timing.retry_period * 2.5 <= timing.renew_deadline)
    sim, store = Simulation(), Store()
    net = Network(random.Random(seed), timing, slow=0.0, lossy=0.0)
    leader = Candidate("leader", 0.0, 5 * timing.lease_duration, None, sim, store, net, timing)
    standby = Candidate("standby", 123.0, None, None, sim, store, net, timing)
    sim.at(0.0, leader.start_try)
    sim.at(timing.lease_duration / 3, standby.start_try)
    sim.run(8 * timing.lease_duration)
    assert [b[0] for b in leader.beliefs] == [pytest.approx(0.0, abs=timing.retry_period)]
    (took_over,) = (start for start, _ in standby.beliefs)
    crash = 5 * timing.lease_duration
    bound = (
        timing.lease_seconds + 2 * timing.retry_period * (1 + RETRY_JITTER) + timing.retry_period
    )
    assert crash - timing.retry_period <= took_over <= crash + bound
