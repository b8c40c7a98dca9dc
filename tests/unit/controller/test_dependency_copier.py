"""CopyDependencies against in-memory apiservers: a copy is created and brought up to
date, written only when its content changes (never once per mirror that uses it);
someone else's object of that name is never written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.unit.controller.builders import JOB, job, key_of
from tests.unit.controller.fakes import FakeCluster, FakeEvents, FakePool, FakeWorker, executor_over
from tests.unit.controller.test_instrument import value

from jobrelay.controller.instrument import Instruments
from jobrelay.controller.relay.executor import Executor
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.plan import CopyDependencies, Plan, Retry, Terminal
from jobrelay.dependencies.copy_rules import digest
from jobrelay.dependencies.template_references import Dependency
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import COPY_LABEL, DIGEST_ANNOTATION, ORIGIN_LABEL

SETTINGS = Dependency("configmap", "settings")


@dataclass
class Env:
    manager: FakeCluster
    worker: FakeCluster
    executor: Executor
    memory: RelayMemory

    async def copy(self, *dependencies: Dependency) -> Any:
        action = CopyDependencies("w1", "team-a", dependencies)
        return await self.executor.apply(key_of(JOB), JOB, job(), Plan((action,)))

    def on_worker(self, name: str = "settings") -> JsonObj | None:
        return self.worker.get("configmaps", f"team-a/{name}")


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    manager = FakeCluster("manager")
    manager.put("configmaps", source({"mode": "fast"}))
    worker = FakeWorker("w1", FakeCluster("w1"))
    pool = FakePool(worker)
    memory = RelayMemory()
    client = manager.client()
    executor = executor_over(client, pool, FakeEvents(), memory=memory)
    yield Env(manager, worker.cluster, executor, memory)
    await client.aclose()
    await pool.aclose()


def source(data: dict[str, str]) -> JsonObj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team-a"}, "data": data}  # fmt: skip


async def test_a_missing_copy_is_created_with_our_marks(env: Env) -> None:
    assert await env.copy(SETTINGS) is None
    copy = env.on_worker()
    assert copy is not None
    assert copy["data"] == {"mode": "fast"}
    assert copy["metadata"]["labels"] == {COPY_LABEL: "jobrelay.dev.relay", ORIGIN_LABEL: "manager"}
    assert copy["metadata"]["annotations"][DIGEST_ANNOTATION] == digest({"data": {"mode": "fast"}})
    assert "ownerReferences" not in copy["metadata"]


async def test_an_edit_on_the_manager_reaches_the_copy(env: Env) -> None:
    await env.copy(SETTINGS)
    before = env.on_worker()
    assert before is not None
    env.manager.objects[("configmaps", "team-a", "settings")]["data"] = {"mode": "careful"}
    assert await env.copy(SETTINGS) is None
    after = env.on_worker()
    assert after is not None
    assert after["data"] == {"mode": "careful"}
    assert "ownerReferences" not in after["metadata"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # replaced, not re-created


async def test_a_current_copy_is_never_written_again_however_many_use_it(env: Env) -> None:
    await env.copy(SETTINGS)
    writes = len([r for r in env.worker.requests if r[0] != "GET"])
    for _ in range(200):  # 200 mirrors sharing it: reads, no writes
        assert await env.copy(SETTINGS) is None
    assert len([r for r in env.worker.requests if r[0] != "GET"]) == writes == 1


async def test_a_copy_owned_by_mirrors_before_is_written_without_owners_once_edited(
    env: Env,
) -> None:
    """A copy made before issue 33 keeps its owners until its content changes."""
    await env.copy(SETTINGS)
    stored = env.worker.objects[("configmaps", "team-a", "settings")]
    stored["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "train", "uid": "m-1"}]  # fmt: skip
    assert await env.copy(SETTINGS) is None
    kept = env.on_worker()
    assert kept is not None and kept["metadata"]["ownerReferences"]
    env.manager.objects[("configmaps", "team-a", "settings")]["data"] = {"mode": "careful"}
    assert await env.copy(SETTINGS) is None
    edited = env.on_worker()
    assert edited is not None and "ownerReferences" not in edited["metadata"]


async def test_someone_elses_object_of_that_name_is_never_written(env: Env) -> None:
    theirs = env.worker.put("configmaps", source({"owner": "them"}))
    version = theirs["metadata"]["resourceVersion"]
    stopped = await env.copy(SETTINGS)
    assert isinstance(stopped, Retry) and "was not made by jobrelay" in stopped.why
    kept = env.on_worker()
    assert kept is not None and kept["metadata"]["resourceVersion"] == version
    assert [r[0] for r in env.worker.requests] == ["GET"]
    assert env.memory.foreign_copies("w1", "team-a", ["configmap/settings"]) == (
        "configmap/settings",
    )


async def test_a_source_gone_meanwhile_stops_unless_optional(env: Env) -> None:
    missing = Dependency("configmap", "gone")
    assert isinstance(await env.copy(missing), Retry)
    assert await env.copy(Dependency("configmap", "gone", optional=True)) is None
    assert env.on_worker("gone") is None


async def test_a_workers_refusal_is_told_to_the_user(env: Env) -> None:
    env.worker.fail("POST", "/configmaps", 403, "Forbidden")
    stopped = await env.copy(SETTINGS)
    assert isinstance(stopped, Terminal) and stopped.reason == "DependencyNotCopied"


async def test_copies_are_counted_for_the_metrics(env: Env) -> None:
    instruments = Instruments()
    env.executor.copier.copied = instruments.dependency_copied
    await env.copy(SETTINGS)
    env.manager.objects[("configmaps", "team-a", "settings")]["data"] = {"mode": "careful"}
    await env.copy(SETTINGS)
    await env.copy(SETTINGS)  # current: nothing written, nothing counted
    for action in ("created", "updated"):
        assert value(instruments, "jobrelay_dependency_copies_total", worker="w1",
                     action=action) == 1.0  # fmt: skip


def test_the_executors_observer_counts_the_copies() -> None:
    instruments = Instruments()
    executor = Executor(
        manager=FakeCluster("manager").client(), pool=FakePool(), events=FakeEvents(),  # type: ignore[arg-type]
        create_namespaces=True, rejected_retry=30.0, memory=RelayMemory(), observer=instruments,
    )  # fmt: skip
    assert executor.copier.copied == instruments.dependency_copied
