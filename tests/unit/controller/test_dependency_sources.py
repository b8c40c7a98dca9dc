"""Which workloads a referenced object concerns (the runner queues exactly those), and
how long a foreign object on a worker is believed to be there."""

from __future__ import annotations

from typing import Any

from tests.unit.controller.builders import JOB, job, key_of
from tests.unit.controller.fakes import FakeCluster

from jobrelay.controller.relay.dependency_sources import DependencySources
from jobrelay.controller.relay.memory import FOREIGN_COPY_TTL, RelayMemory
from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.outcome import Lane


def mounting(name: str, *, key: str = "train") -> Any:
    obj = job()
    obj["metadata"]["name"] = key
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": "v", "configMap": {"name": name}}]
    return obj


def test_the_index_follows_what_each_workload_references() -> None:
    sources = DependencySources(FakeCluster("manager").client())
    train, other = key_of(JOB), WorkloadKey(JOB.name, "team-a/other")
    sources.workload_changed(train, JOB, mounting("settings"))
    sources.workload_changed(other, JOB, mounting("settings", key="other"))
    assert sources.referencing("configmap", "team-a/settings") == [other, train]
    assert sources.referencing("configmap", "team-b/settings") == []
    assert sources.referencing("secret", "team-a/settings") == []
    # Changed to another ConfigMap, then deleted.
    sources.workload_changed(train, JOB, mounting("late"))
    assert sources.referencing("configmap", "team-a/settings") == [other]
    assert sources.referencing("configmap", "team-a/late") == [train]
    sources.workload_changed(train, JOB, None)
    sources.workload_changed(other, JOB, job())
    assert sources.referencing("configmap", "team-a/late") == []
    assert sources.referencing("configmap", "team-a/settings") == []


def test_a_change_queues_exactly_the_workloads_that_reference_it() -> None:
    sources = DependencySources(FakeCluster("manager").client())
    queued: list[tuple[WorkloadKey, Lane]] = []
    sources._enqueue = lambda key, lane: queued.append((key, lane))
    sources.workload_changed(key_of(JOB), JOB, mounting("settings"))
    sources.copy_changed("configmap", "team-a/unrelated")
    sources.copy_changed("configmap", "team-a/settings")
    assert queued == [(key_of(JOB), Lane.STATUS)]


def test_a_foreign_object_is_believed_there_for_a_while() -> None:
    now = [0.0]
    memory = RelayMemory(monotonic=lambda: now[0])
    memory.foreign_copy("w1", "team-a", "configmap/settings")
    names = ["configmap/settings", "secret/creds"]
    assert memory.foreign_copies("w1", "team-a", names) == ("configmap/settings",)
    assert memory.foreign_copies("w2", "team-a", names) == ()
    assert memory.foreign_copies("w1", "team-b", names) == ()
    now[0] = FOREIGN_COPY_TTL + 1
    assert memory.foreign_copies("w1", "team-a", names) == ()


def secret_env(name: str) -> Any:
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}}
    ]
    return obj


def test_secrets_are_read_only_in_the_namespaces_opened_to_secret_copying() -> None:
    """With --dependency-secret-namespaces, one Secret informer per namespace opened and a
    Secret elsewhere is closed (never read); ConfigMaps and ServiceAccounts everywhere."""
    client = FakeCluster("manager").client()
    opened = DependencySources(client, secret_namespaces=["team-b", "team-c"])
    assert sorted(opened.informers) == [
        ("configmap", ""), ("secret", "team-b"), ("secret", "team-c"), ("serviceaccount", ""),
    ]  # fmt: skip
    assert opened.closed("secret", "team-a") and not opened.closed("secret", "team-b")
    assert not opened.closed("configmap", "team-a")
    [needed] = opened.needed(JOB, secret_env("creds"))  # job() is in team-a
    assert needed.closed and needed.source is None
    none = DependencySources(client, secret_namespaces=[])
    assert none.closed("secret", "team-b")
    everywhere = DependencySources(client)
    assert ("secret", "") in everywhere.informers and not everywhere.closed("secret", "team-a")
    [needed] = everywhere.needed(JOB, secret_env("creds"))
    assert not needed.closed
