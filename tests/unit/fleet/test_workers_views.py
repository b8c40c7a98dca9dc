"""Reading the pool never changes it; the probe and status path moves the lost clock.

The pool's registrations and records are set by hand here (a fake Informer of
registrations, records without connections), so that every case of the lost
timing is reached without waiting for one.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict
from typing import Any

import pytest
from tests.unit.fleet.fakekube import FakeKube

from jobrelay.fleet.workers import PoolOptions, WorkerPool, WorkerRecord
from jobrelay.fleet.workers.liveness_rules import LostClock
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.connecting import ApiOptions
from jobrelay.vocabulary.outcome import Done
from jobrelay.vocabulary.workercluster import DrainMode

LOST_TIMEOUT = 900.0
SILENT_AT = "2026-01-01T00:00:00Z"
SILENT_EPOCH = 1767225600.0


class Registrations:
    """The registrations Informer as the pool reads it: get and values."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects}

    def get(self, name: str) -> dict[str, Any] | None:
        return self.objects.get(name)

    def values(self) -> list[dict[str, Any]]:
        return list(self.objects.values())

    def keys(self) -> Iterator[str]:
        return iter(self.objects)


def registration(
    name: str, *, silent: bool = False, drain: str | None = None, cordoned: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"cordoned": cordoned}
    if drain is not None:
        spec["drain"] = drain
    obj: dict[str, Any] = {"metadata": {"name": name, "labels": {"zone": "a"}}, "spec": spec}
    if silent:
        condition = {"type": "Connected", "status": "False", "lastTransitionTime": SILENT_AT}
        obj["status"] = {"conditions": [condition]}
    return obj


@pytest.fixture
async def pool() -> AsyncIterator[WorkerPool]:
    options = PoolOptions(
        namespace="jobrelay-system", controller_name="jobrelay.dev/relay", origin="hq",
        sync_timeout=1.0, status_interval=1.0, health_timeout=6.0, lost_timeout=LOST_TIMEOUT,
        api=ApiOptions(),
    )  # fmt: skip
    manager = FakeKube("manager").client()
    made = WorkerPool(manager, [], lambda key: None, options)
    yield made
    await manager.aclose()


def records_state(pool: WorkerPool) -> dict[str, Any]:
    return {name: copy.deepcopy(asdict(r)) for name, r in pool._records.items()}


def set_up(pool: WorkerPool, *registrations: dict[str, Any]) -> None:
    pool._registrations = Registrations(*registrations)  # type: ignore[assignment]


def record(name: str, **fields: Any) -> WorkerRecord:
    lost = LostClock(LOST_TIMEOUT, **fields.pop("lost", {}))
    return WorkerRecord(name, lost, **fields)


async def test_views_change_nothing(pool: WorkerPool) -> None:
    set_up(
        pool,
        registration("unsynced"),
        registration("unusable", silent=True),
        registration("unusable-fresh"),
        registration("down", drain="All", cordoned=True),
        registration("draining", drain="NotStarted"),
    )
    pool._records = {
        "unusable": record("unusable", unusable=True),
        "unusable-fresh": record("unusable-fresh", unusable=True),
        "down": record("down", unusable=True, lost={"down_since": 1000.0}),
        "draining": record("draining"),
    }
    before = records_state(pool)
    first = pool.views()

    def seen(views: list[Any]) -> list[tuple[Any, ...]]:
        return [(v.name, v.cordoned, v.drain, v.connected, v.lost) for v in views]

    for _ in range(3):
        assert seen(pool.views()) == seen(first)
    assert records_state(pool) == before  # nothing moved: no clock started, none stopped
    by_name = {view.name: view for view in first}
    # Not synced yet, and connecting: not timed (declaring it lost early could run a
    # workload twice).
    assert by_name["unsynced"].lost_in == LOST_TIMEOUT
    assert by_name["draining"].lost_in == LOST_TIMEOUT and not by_name["draining"].lost
    # An unusable kubeconfig counts from when the stored condition turned False...
    assert by_name["unusable"].lost  # (2026-01-01 is long before the test runs)
    # ...or, with none stored, from now (until the status path starts its clock).
    fresh = by_name["unusable-fresh"].lost_in
    assert fresh is not None and LOST_TIMEOUT - 5 < fresh <= LOST_TIMEOUT
    assert by_name["down"].lost and by_name["down"].drain is DrainMode.ALL
    assert by_name["down"].cordoned and by_name["down"].labels == {"zone": "a"}
    assert by_name["draining"].drain is DrainMode.NOT_STARTED
    assert by_name["unsynced"].drain is None and not by_name["unsynced"].cordoned
    assert all(view.worker is None for view in first)
    assert pool.workers() == [] and pool.get("down") is None
    assert pool.mirror_keys() == set() and not pool.has_mirror(WorkloadKey("Job", "a/b"))


async def test_the_status_path_starts_the_lost_clock(pool: WorkerPool) -> None:
    silent, fresh = registration("silent", silent=True), registration("fresh")
    set_up(pool, silent, fresh)
    pool._records = {
        "silent": record("silent", unusable=True),
        "fresh": record("fresh", unusable=True),
        "connecting": record("connecting"),
    }
    pool._observe(pool._records["silent"], silent)
    assert pool._records["silent"].lost.down_since == SILENT_EPOCH
    pool._observe(pool._records["fresh"], fresh)
    assert pool._records["fresh"].lost.down_since is not None
    pool._observe(pool._records["connecting"], registration("connecting"))
    assert pool._records["connecting"].lost.down_since is None  # connecting: not timed


async def test_following_the_lost_timing_declares_and_brings_keys_back(pool: WorkerPool) -> None:
    told: list[WorkloadKey] = []
    pool._on_mirror_change = told.append
    silent = registration("w", silent=True)
    set_up(pool, silent)
    lost = record("w", unusable=True)
    pool._records = {"w": lost}
    pool._follow_lost(lost, silent)
    assert lost.lost.declared_lost and lost.lost.lost_time() == SILENT_EPOCH + LOST_TIMEOUT
    # Declared once: following again changes nothing.
    pool._follow_lost(lost, silent)
    assert lost.lost.declared_lost
    assert pool.views()[0].lost


async def test_an_unregistered_worker_is_forgotten_whole(pool: WorkerPool) -> None:
    set_up(pool)
    gone = record("gone", unusable=True, lost={"down_since": 5.0, "declared_lost": True})
    pool._records = {"gone": gone}
    assert await pool._sync("gone") == Done()
    assert pool._records == {}
    assert pool.views() == []
    await pool._forget("never-there")  # nothing to forget: no error


async def test_a_probe_verdict_moves_the_clock_of_the_current_record(pool: WorkerPool) -> None:
    from jobrelay.fleet.workers.liveness_rules import ConnectedVerdict

    class Named:
        name = "w"

    set_up(pool, registration("w"))
    current = record("w")
    pool._records = {"w": current}
    pool._verdict_changed(Named(), ConnectedVerdict(False, "Timeout", "t"))  # type: ignore[arg-type]
    since = current.lost.down_since
    assert since is not None
    pool._verdict_changed(Named(), ConnectedVerdict(False, "Unreachable", "u"))  # type: ignore[arg-type]
    assert current.lost.down_since == since  # counted from the first failure
    pool._verdict_changed(Named(), ConnectedVerdict(True, "Connected", "ok"))  # type: ignore[arg-type]
    assert current.lost.down_since is None
    # A worker that is no record's (unregistered meanwhile) moves nothing.
    pool._records = {}
    pool._verdict_changed(Named(), ConnectedVerdict(False, "Timeout", "t"))  # type: ignore[arg-type]
    pool._probed(Named())  # type: ignore[arg-type]
