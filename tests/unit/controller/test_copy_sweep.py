"""The sweep of orphaned copies: only ours (the caches select them), unowned, older than
the grace period, deleted with their UID as a precondition."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.unit.controller.fakes import FakeCluster

from jobrelay.controller.copy_sweep import ORPHAN_GRACE, sweep_orphan_copies
from jobrelay.dependencies.copy_rules import slim_copy
from jobrelay.vocabulary.json_types import JsonObj


def stamp(seconds_ago: float) -> str:
    then = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return then.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Feed:
    cached: list[tuple[Any, JsonObj]] = field(default_factory=list)

    def copies(self) -> Iterator[tuple[Any, JsonObj]]:
        yield from self.cached


@dataclass
class Worker:
    name: str
    cluster: FakeCluster
    connected: bool = True
    dependency_feed: Feed = field(default_factory=Feed)

    def __post_init__(self) -> None:
        self.client = self.cluster.client()


@dataclass
class Pool:
    members: list[Worker]

    def workers(self) -> list[Worker]:
        return self.members


def cached_copy(worker: Worker, name: str, *, age: float, owned: bool) -> JsonObj:
    obj: JsonObj = {"metadata": {"name": name, "namespace": "team-a",
                                 "creationTimestamp": stamp(age)}}  # fmt: skip
    if owned:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                               "name": "j", "uid": "m-1"}]  # fmt: skip
    stored = worker.cluster.put("configmaps", obj)
    worker.dependency_feed.cached.append(("configmap", slim_copy(stored)))
    return stored


async def test_only_unowned_copies_past_the_grace_period_go() -> None:
    worker = Worker("w1", FakeCluster("w1"))
    cached_copy(worker, "orphan", age=ORPHAN_GRACE + 60, owned=False)
    cached_copy(worker, "fresh", age=10, owned=False)  # its mirror is about to be made
    cached_copy(worker, "owned", age=ORPHAN_GRACE + 60, owned=True)
    assert await sweep_orphan_copies(Pool([worker])) == 1  # type: ignore[arg-type]
    left = {name for (_, _, name) in worker.cluster.objects}
    assert left == {"fresh", "owned"}
    [delete] = [r for r in worker.cluster.requests if r[0] == "DELETE"]
    assert delete[2]["preconditions"]["uid"] == "w1-uid-1"


async def test_a_namesake_made_since_is_not_deleted_and_nothing_raises() -> None:
    worker = Worker("w1", FakeCluster("w1"))
    old = cached_copy(worker, "orphan", age=ORPHAN_GRACE + 60, owned=False)
    # Replaced on the worker since the cache saw it: another UID.
    worker.cluster.objects[("configmaps", "team-a", "orphan")] = {
        **old,
        "metadata": {**old["metadata"], "uid": "new"},
    }
    gone = Worker("w2", FakeCluster("w2"), connected=False)
    cached_copy(gone, "orphan", age=ORPHAN_GRACE + 60, owned=False)
    assert await sweep_orphan_copies(Pool([worker, gone])) == 0  # type: ignore[arg-type]
    assert ("configmaps", "team-a", "orphan") in worker.cluster.objects
    assert ("configmaps", "team-a", "orphan") in gone.cluster.objects
