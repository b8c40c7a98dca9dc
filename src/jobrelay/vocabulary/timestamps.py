"""The one way jobrelay writes and reads a time: RFC 3339 in UTC, as Kubernetes does.

``metav1.Time`` (conditions, Events, status) has seconds; ``metav1.MicroTime``
(Leases, events.k8s.io) has microseconds. Pure but for :func:`utc_now`, which
reads the wall clock.
"""

from __future__ import annotations

import datetime
import functools

__all__ = ["micro_time", "parse_time", "rfc3339", "seconds_since", "utc_now"]


def rfc3339(moment: datetime.datetime | float) -> str:
    """A Kubernetes Time: ``moment`` (a datetime, or epoch seconds) in UTC, to the second."""
    if not isinstance(moment, datetime.datetime):
        moment = datetime.datetime.fromtimestamp(moment, datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime.datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_now() -> str:
    """Now, as a Kubernetes Time."""
    return _second(int(datetime.datetime.now(datetime.UTC).timestamp()))


@functools.lru_cache(maxsize=2)  # every snapshot asks: formatted once a second
def _second(epoch_second: int) -> str:
    return rfc3339(epoch_second)


def parse_time(value: object) -> datetime.datetime | None:
    """A Time or MicroTime as an aware datetime; None for anything else (a worker or a
    user may write anything there)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def seconds_since(timestamp: str, now: datetime.datetime | None = None) -> float | None:
    """Seconds from an RFC 3339 ``timestamp`` to ``now`` (the wall clock when None);
    None when it is not one."""
    then = parse_time(timestamp)
    if then is None:
        return None
    return ((now or datetime.datetime.now(datetime.UTC)) - then).total_seconds()
