"""The leader Lease as data, and the pure decision "may I take or renew it now".

No I/O and no clock of its own: every time is handed in, as seconds of the
caller's monotonic clock (the event loop's). As in client-go's leaderelection,
whether another holder's lease has expired is judged by *when this process
saw its record last change* (``Observation.seen_at``) plus the record's
``leaseDurationSeconds``, never by comparing ``renewTime`` with our wall
clock: two machines' wall clocks may disagree by more than the margin between
the renew deadline and the lease duration, monotonic intervals do not.

A leader counts its lease from the moment it *sent* the request that last
renewed it, and stops writing ``renew_deadline`` seconds later unless a renewal
succeeded meanwhile (:func:`leading_until`). Every other candidate saw that
renewal after it was committed, so after it was sent, and waits
``lease_duration > renew_deadline`` from then: the two intervals never overlap.

:func:`lease_freshness` is a reader's verdict (the CLI's "does a controller lead?"), never
a candidate's: one read, no history, so it compares ``renewTime`` with the reader's wall
clock, with slack for skew; it only decides whether to warn a user.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.timestamps import micro_time, parse_time

# How much later than the retry period a candidate may try again (client-go jitters too),
# so that two standbys do not poll in lockstep.
RETRY_JITTER = 0.2


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    """Seconds; client-go's defaults are 15, 10 and 2."""

    # How long other candidates wait, after seeing the last renewal, before taking over.
    lease_duration: float
    # How long the leader keeps acting without a successful renewal.
    renew_deadline: float
    # How often candidates try to acquire, and the leader to renew.
    retry_period: float

    def problems(self) -> list[str]:
        """Why these timings are unsafe or unworkable (empty: fine)."""
        found = []
        if self.lease_duration < 1:
            found.append("the lease duration must be at least 1 s (Leases count whole seconds)")
        if self.renew_deadline >= self.lease_duration:
            found.append(
                "the renew deadline must be shorter than the lease duration, or a standby "
                "could take over while the leader still acts"
            )
        if self.retry_period * (1 + RETRY_JITTER) >= self.renew_deadline:
            found.append(
                "the retry period (plus its 20 % jitter) must be shorter than the renew "
                "deadline, or the leader gets no second try before it must stop"
            )
        if self.retry_period <= 0:
            found.append("the retry period must be positive")
        return found

    @property
    def lease_seconds(self) -> int:
        """``leaseDurationSeconds`` as written on the Lease (whole seconds, rounded up)."""
        return max(1, math.ceil(self.lease_duration))


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election part of a Lease's spec (client-go's LeaderElectionRecord)."""

    holder: str  # "" when nobody holds it (released)
    lease_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_seconds=_int(spec.get("leaseDurationSeconds")),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=_int(spec.get("leaseTransitions")),
        )

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


@dataclass(frozen=True, slots=True)
class Observation:
    """A Lease as this process last read it, and since when it has looked like that."""

    record: LeaseRecord | None  # None: there is no Lease object
    resource_version: str
    seen_at: float  # the caller's monotonic seconds when the record was first seen so


def observe(
    previous: Observation | None, lease: Mapping[str, Any] | None, now: float
) -> Observation:
    """What a read of the Lease (None: 404) tells, keeping the time of the last change.

    Only a *changed* record restarts the wait: a holder that stopped renewing
    shows the same record at every read, and its lease runs out.
    """
    if lease is None:
        record, version = None, ""
    else:
        record = LeaseRecord.from_lease(lease)
        version = Meta(lease).resource_version
    if previous is not None and previous.record == record:
        return replace(previous, resource_version=version)
    return Observation(record, version, now)


@dataclass(frozen=True, slots=True)
class Acquire:
    """Write this record: create the Lease (``create``) or update it with ``resource_version``."""

    record: LeaseRecord
    create: bool
    resource_version: str
    renewal: bool  # we held it already (a renewal), else a takeover


@dataclass(frozen=True, slots=True)
class Wait:
    """Someone else holds a lease that has not expired by our observation."""

    holder: str
    expires_in: float  # seconds, unless renewed meanwhile


Decision = Acquire | Wait


def decide(
    observed: Observation, now: float, identity: str, timing: ElectionTiming, wall: datetime
) -> Decision:
    """May ``identity`` take or renew the lease now, and with which record.

    - no Lease: create it, holding it (0 transitions);
    - held by us: renew (acquire time and transitions kept);
    - free (released) or expired: take it over (transitions + 1);
    - held by another, not expired: wait.
    """
    stamp = micro_time(wall)
    record = observed.record
    if record is None:
        mine = LeaseRecord(identity, timing.lease_seconds, stamp, stamp, 0)
        return Acquire(mine, create=True, resource_version="", renewal=False)
    if record.holder == identity:
        renewed = replace(record, lease_seconds=timing.lease_seconds, renew_time=stamp)
        return Acquire(
            renewed, create=False, resource_version=observed.resource_version, renewal=True
        )
    if record.holder:
        # A record without a duration is malformed: wait as long as we would make others wait.
        duration = record.lease_seconds if record.lease_seconds > 0 else timing.lease_seconds
        expires_in = observed.seen_at + duration - now
        if expires_in > 0:
            return Wait(record.holder, expires_in)
    taken = LeaseRecord(identity, timing.lease_seconds, stamp, stamp, record.transitions + 1)
    return Acquire(taken, create=False, resource_version=observed.resource_version, renewal=False)


def leading_until(sent_at: float, timing: ElectionTiming) -> float:
    """Until when a leader may act after a renewal sent at ``sent_at`` succeeded."""
    return sent_at + timing.renew_deadline


def released(record: LeaseRecord, wall: datetime) -> LeaseRecord:
    """The record that hands the lease back at once: no holder, one second (as client-go)."""
    stamp = micro_time(wall)
    return LeaseRecord("", 1, stamp, stamp, record.transitions)


def lease_body(
    name: str,
    namespace: str,
    record: LeaseRecord,
    *,
    resource_version: str = "",
    base: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Lease to create or PUT; fields of ``base`` we do not own are kept, and the
    holder's ``annotations`` (what it tells of itself: its version) set."""
    metadata: dict[str, Any] = dict((base or {}).get("metadata") or {})
    metadata.update({"name": name, "namespace": namespace})
    if annotations:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    spec = {**((base or {}).get("spec") or {}), **record.spec()}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):  # junk, NaN, 1e400 read as infinity
        return 0


class LeaseState(StrEnum):
    """Whether a controller holds the Lease, as a reader (the CLI) can tell."""

    FRESH = "fresh"  # held and renewed within its duration
    STALE = "stale"  # expired, or released: no controller leads now
    ABSENT = "absent"  # no Lease: no controller ever ran here (or it uses another namespace)
    UNKNOWN = "unknown"  # the reader may not read Leases


# How far the reader's wall clock may run ahead of the leader's before a fresh lease looks
# expired: a reader has no monotonic observation, so it gives the leader this much slack.
CLOCK_SKEW_GRACE_SECONDS = 10.0
# leaseDurationSeconds when a record has none (client-go's and `jobrelay run`'s default).
DEFAULT_LEASE_SECONDS = 15


@dataclass(frozen=True, slots=True)
class LeaseFreshness:
    """What a read of the leader's Lease tells of the controller, at ``now``."""

    state: LeaseState
    holder: str = ""  # the identity that last held it ("" when released or unknown)
    renewed_at: datetime | None = None  # its last renewTime, when it has a readable one
    expired_for: float = 0.0  # STALE: seconds since it expired (0 when not known)


def lease_freshness(
    lease: Mapping[str, Any] | None, now: datetime, *, readable: bool = True
) -> LeaseFreshness:
    """Fresh, stale, absent (``lease`` None: a 404) or unknown (``readable`` False: a 403).

    Judged against the reader's wall clock (all it has) with :data:`CLOCK_SKEW_GRACE_SECONDS`
    of slack. A released lease (no holder) is stale at once: its holder let it go.
    """
    if not readable:
        return LeaseFreshness(LeaseState.UNKNOWN)
    if lease is None:
        return LeaseFreshness(LeaseState.ABSENT)
    record = LeaseRecord.from_lease(lease)
    renewed_at = parse_time(record.renew_time or record.acquire_time)
    if not record.holder:
        since = 0.0 if renewed_at is None else max(0.0, (now - renewed_at).total_seconds())
        return LeaseFreshness(LeaseState.STALE, "", renewed_at, since)
    if renewed_at is None:  # held, never renewed that we can read: malformed, say stale
        return LeaseFreshness(LeaseState.STALE, record.holder, None, 0.0)
    duration = record.lease_seconds if record.lease_seconds > 0 else DEFAULT_LEASE_SECONDS
    expired_for = (now - renewed_at).total_seconds() - duration
    if expired_for <= CLOCK_SKEW_GRACE_SECONDS:
        return LeaseFreshness(LeaseState.FRESH, record.holder, renewed_at, 0.0)
    return LeaseFreshness(LeaseState.STALE, record.holder, renewed_at, expired_for)
