"""What a user reading a finished workload's logs is told once its pods are gone: when it
finished, when its pods went, and the setting that keeps them longer; never that it
waits for a worker."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from jobrelay.kinds.finished_mirrors import FinishedMirrorTtl
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.relayapi.finished_logs_rules import no_pods_left, pods_removed

AT = "2026-03-01T12:05:00Z"
LATER = datetime.datetime(2026, 3, 1, 15, 0, tzinfo=datetime.UTC)
HOUR = FinishedMirrorTtl(3600)


def _job(*, placed: bool = True, at: str | None = AT, ttl: int | None = None,
         finished: bool = True) -> dict[str, Any]:  # fmt: skip
    condition = {"type": "Failed", "status": "True"}
    if at is not None:
        condition["lastTransitionTime"] = at
    annotations = {"jobrelay.dev/cluster": "w1", "jobrelay.dev/placements": "w1"} if placed else {}
    return {
        "metadata": {"name": "flaky", "namespace": "demo", "annotations": annotations},
        "spec": {} if ttl is None else {"ttlSecondsAfterFinished": ttl},
        "status": {"conditions": [condition] if finished else []},
    }


CASES = {
    "the ttl ran out": (
        _job(),
        HOUR,
        LATER,
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; its pods were removed at "
        "2026-03-01T13:05:00Z (--finished-mirror-ttl 1h; set it longer to keep logs longer)",
    ),
    "a 20s ttl": (
        _job(),
        FinishedMirrorTtl(20),
        LATER,
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; its pods were removed at "
        "2026-03-01T12:05:20Z (--finished-mirror-ttl 20s; set it longer to keep logs longer)",
    ),
    "0: at once": (
        _job(),
        FinishedMirrorTtl(0),
        LATER,
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; its pods were removed at "
        "2026-03-01T12:05:00Z (--finished-mirror-ttl 0s; set it longer to keep logs longer)",
    ),
    "its own ttlSecondsAfterFinished was shorter": (
        _job(ttl=60),
        HOUR,
        LATER,
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; its pods were removed at "
        "2026-03-01T12:06:00Z (its own ttlSecondsAfterFinished: 60)",
    ),
    "gone before the deadline (not by jobrelay)": (
        _job(),
        HOUR,
        datetime.datetime(2026, 3, 1, 12, 10, tzinfo=datetime.UTC),
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; its mirror was removed from its "
        "worker before 2026-03-01T13:05:00Z, when --finished-mirror-ttl 1h would have removed "
        "it: its pods' logs are gone",
    ),
    "kept for ever, yet gone": (
        _job(),
        FinishedMirrorTtl(0, forever=True),
        LATER,
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; its mirror was removed from its "
        "worker, not by jobrelay (--keep-finished-mirrors keeps it): its pods' logs are gone",
    ),
    "no finish time in its status": (
        _job(at=None),
        HOUR,
        LATER,
        "Job demo/flaky finished; its pods were removed from its worker "
        "(--finished-mirror-ttl 1h; set it longer to keep logs longer)",
    ),
    "finished without ever running": (
        _job(placed=False),
        HOUR,
        LATER,
        "Job demo/flaky finished at 2026-03-01T12:05:00Z without running on a worker: "
        "it has no pod logs",
    ),
    "not finished: the usual answer stands": (_job(finished=False), HOUR, LATER, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pods_removed(name: str) -> None:
    obj, ttl, now, expected = CASES[name]
    told = pods_removed(JobKind(), obj, ttl, now=now)
    assert told == expected
    assert told is None or "waits for a worker" not in told


def test_a_kept_mirror_without_pods() -> None:
    assert no_pods_left(JobKind(), _job()) == (
        "Job demo/flaky finished at 2026-03-01T12:05:00Z; none of its pods is left on its worker"
    )
    assert no_pods_left(JobKind(), _job(finished=False)) is None


def test_a_finish_time_at_the_calendars_end_is_told_without_overflow() -> None:
    told = pods_removed(JobKind(), _job(at="9999-12-31T23:00:00Z"), HOUR, now=LATER)
    assert told is not None and "9999-12-31T23:00:00Z" in told
