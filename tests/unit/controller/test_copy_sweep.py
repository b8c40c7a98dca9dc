"""The copy janitor: a copy goes once no workload on its worker uses it (no mirror there
comes from a workload naming it, none is placed there unfinished), after it stayed
unused for the settle time, with its UID as a precondition; from the caches alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.unit.controller.fakes import FakeCluster

from jobrelay.controller.copy_sweep import CopyJanitor
from jobrelay.dependencies.copy_rules import slim_copy
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.json_types import JsonObj

JOB = JobKind()


@dataclass
class Feed:
    cached: list[tuple[Any, JsonObj]] = field(default_factory=list)

    def copies(self) -> Iterator[tuple[Any, JsonObj]]:
        yield from self.cached


@dataclass
class MirrorCache:
    has_synced: bool = True
    last_error: BaseException | None = None


@dataclass
class Worker:
    name: str
    cluster: FakeCluster
    connected: bool = True
    dependency_feed: Feed = field(default_factory=Feed)
    mirrors: dict[str, MirrorCache] = field(default_factory=lambda: {JOB.name: MirrorCache()})
    mirrored: dict[tuple[str, str], JsonObj] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.client = self.cluster.client()

    def mirror(self, key: tuple[str, str]) -> JsonObj | None:
        return self.mirrored.get((key[0], key[1]))


@dataclass
class Pool:
    members: list[Worker]

    def workers(self) -> list[Worker]:
        return self.members


@dataclass
class Runtime:
    kind: JobKind
    objects: dict[str, JsonObj]


def cached_copy(worker: Worker, name: str) -> JsonObj:
    stored = worker.cluster.put("configmaps", {"metadata": {"name": name, "namespace": "team-a"}})
    worker.dependency_feed.cached.append(("configmap", slim_copy(stored)))
    return stored


def job(name: str, placed: str = "", finished: bool = False) -> JsonObj:
    obj: JsonObj = {"metadata": {"name": name, "namespace": "team-a", "annotations": {}}}
    if placed:
        obj["metadata"]["annotations"]["jobrelay.dev/cluster"] = placed
    if finished:
        obj["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    return obj


class Fleet:
    """Workers with copies, workloads naming them, a janitor over both, and a clock."""

    def __init__(self, *workers: Worker) -> None:
        self.workers = list(workers)
        self.objects: dict[str, JsonObj] = {}
        # Which workloads name each copy ("team-a/settings").
        self.names: dict[str, list[str]] = {}
        self.now = 0.0
        self.janitor = CopyJanitor(
            Pool(self.workers),  # type: ignore[arg-type]
            lambda kind, key: [WorkloadKey(JOB.name, k) for k in self.names.get(key, [])],
            {JOB.name: Runtime(JOB, self.objects)},  # type: ignore[dict-item]
            settle=10.0,
            clock=lambda: self.now,
        )

    async def sweep_at(self, now: float) -> int:
        self.now = now
        return await self.janitor.sweep()


def left(worker: Worker) -> set[str]:
    return {name for (_, _, name) in worker.cluster.objects}


async def test_a_copy_goes_once_no_workload_there_uses_it_and_it_stayed_so() -> None:
    w1 = Worker("w1", FakeCluster("w1"))
    for name in ("mounted", "placed", "finished", "elsewhere", "unnamed"):
        cached_copy(w1, name)
    fleet = Fleet(w1)
    fleet.names = {
        "team-a/mounted": ["team-a/a"],  # its mirror is there
        "team-a/placed": ["team-a/b"],  # placed there, its mirror on its way
        "team-a/finished": ["team-a/c"],  # finished there, its mirror gone
        "team-a/elsewhere": ["team-a/d"],  # moved to another worker
    }
    w1.mirrored[(JOB.name, "team-a/a")] = {"metadata": {"name": "a"}}
    fleet.objects.update({
        "team-a/a": job("a", "w1"), "team-a/b": job("b", "w1"),
        "team-a/c": job("c", "w1", finished=True), "team-a/d": job("d", "w2"),
    })  # fmt: skip
    assert await fleet.sweep_at(0.0) == 0  # never on one look
    assert await fleet.sweep_at(5.0) == 0
    assert await fleet.sweep_at(10.0) == 3
    assert left(w1) == {"mounted", "placed"}
    deletes = [r for r in w1.cluster.requests if r[0] == "DELETE"]
    assert all(r[2]["preconditions"]["uid"] for r in deletes)


async def test_a_copy_used_again_meanwhile_starts_over() -> None:
    w1 = Worker("w1", FakeCluster("w1"))
    cached_copy(w1, "settings")
    fleet = Fleet(w1)
    fleet.names = {"team-a/settings": ["team-a/a"]}
    fleet.objects["team-a/a"] = job("a", "w2")
    assert await fleet.sweep_at(0.0) == 0
    fleet.objects["team-a/a"] = job("a", "w1")  # placed here meanwhile
    assert await fleet.sweep_at(6.0) == 0
    fleet.objects["team-a/a"] = job("a", "w1", finished=True)
    assert await fleet.sweep_at(12.0) == 0  # unused since 12 only
    assert await fleet.sweep_at(22.0) == 1
    assert left(w1) == set()


async def test_a_worker_whose_mirrors_are_not_listed_or_away_is_left_alone() -> None:
    unlisted = Worker("w1", FakeCluster("w1"), mirrors={JOB.name: MirrorCache(False)})
    away = Worker("w2", FakeCluster("w2"), connected=False)
    # A kind not served there (404) has no mirrors there: no reason to wait.
    not_served = ApiError(404, "NotFound", "the server could not find the requested resource")
    served_not = Worker("w3", FakeCluster("w3"),
                        mirrors={JOB.name: MirrorCache(), "JobSet": MirrorCache(False, not_served)})  # fmt: skip
    for worker in (unlisted, away, served_not):
        cached_copy(worker, "orphan")
    fleet = Fleet(unlisted, away, served_not)
    await fleet.sweep_at(0.0)
    assert await fleet.sweep_at(20.0) == 1
    assert (left(unlisted), left(away), left(served_not)) == ({"orphan"}, {"orphan"}, set())


async def test_a_namesake_made_since_is_not_deleted_and_nothing_raises() -> None:
    w1 = Worker("w1", FakeCluster("w1"))
    old = cached_copy(w1, "orphan")
    # Replaced on the worker since the cache saw it: another UID.
    w1.cluster.objects[("configmaps", "team-a", "orphan")] = {
        **old,
        "metadata": {**old["metadata"], "uid": "new"},
    }
    fleet = Fleet(w1)
    await fleet.sweep_at(0.0)
    assert await fleet.sweep_at(20.0) == 0
    assert ("configmaps", "team-a", "orphan") in w1.cluster.objects
