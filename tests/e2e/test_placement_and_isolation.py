"""Where mirrors go, and what jobrelay leaves alone: foreign Jobs, unmanaged Jobs, refusals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, NAMESPACES, PODS
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION
from tests.e2e.support import Relay
from tests.kubetools import finished, is_true, job_manifest, refuse_jobs

pytestmark = pytest.mark.e2e

RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


def jobrelay_keys(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata") or {}
    keys = [*(meta.get("labels") or {}), *(meta.get("annotations") or {})]
    return [key for key in keys if key.startswith("jobrelay.dev/")]


async def assert_absent(client: ApiClient, name: str, namespace: str) -> None:
    with pytest.raises(ApiError) as missing:
        await client.get(JOBS, name, namespace=namespace)
    assert missing.value.is_not_found, missing.value


async def test_name_taken_on_one_worker_goes_to_the_other_and_leaves_the_foreign_job_alone(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    taken_on, free = relay.workers[0], relay.workers[1]
    names = ["taken-a", "taken-b", "taken-c"]  # several, so a lucky placement proves nothing
    foreign: dict[str, dict[str, Any]] = {}
    for name in names:
        foreign[name] = await clients[taken_on].create(
            JOBS, job_manifest(name, annotations=RUN_FOREVER), namespace=relay.namespace
        )
    for name in names:
        await relay.submit(job_manifest(name, annotations={"fleet.jobrelay.dev/duration": "1s"}))
    for name in names:
        done = await relay.verify(name, outcome="Complete")
        assert done.cluster == free, f"{name} was placed on {done.cluster}, where the name is taken"

    async def assert_foreign_untouched() -> None:
        for name, before in foreign.items():
            now = await clients[taken_on].get(JOBS, name, namespace=relay.namespace)
            assert now["metadata"]["uid"] == before["metadata"]["uid"], f"{name} was replaced"
            assert not jobrelay_keys(now), f"jobrelay marked the foreign Job {name}"
            assert now["spec"].get("suspend") in (None, False), f"{name} was suspended"
            assert not finished(now), f"the foreign Job {name} was stopped"

    await assert_foreign_untouched()
    # Deleting the management Jobs must not touch the foreign Jobs either.
    for name in names:
        await relay.manager.delete(JOBS, name, namespace=relay.namespace)
    for name in names:
        await relay.wait_gone(name)
    await relay.settled(*names)  # the deletions reconciled
    await assert_foreign_untouched()


async def test_unmanaged_job_runs_on_the_manager_untouched(relay: Relay) -> None:
    created = await relay.submit(
        job_manifest("local", annotations={"fleet.jobrelay.dev/duration": "1s"}), managed=False
    )
    uid = created["metadata"]["uid"]
    job = await relay.wait_finished("local")
    assert is_true(job, "Complete"), job["status"]
    pods = await relay.manager.list(
        PODS, namespace=relay.namespace, label_selector=f"batch.kubernetes.io/controller-uid={uid}"
    )
    assert pods.items, "the Job did not run on the manager's own nodes"
    await relay.settled("local")  # seen by jobrelay since it finished
    job = await relay.get("local")
    assert "managedBy" not in job["spec"]
    assert not jobrelay_keys(job), jobrelay_keys(job)
    for version in relay.jobs.versions(uid):
        assert CLUSTER_ANNOTATION not in (version["metadata"].get("annotations") or {}), version
    for worker in relay.workers:
        assert relay.jobs_named("local", worker) == [], f"a Job 'local' appeared on {worker}"
        await assert_absent(relay.clients[worker], "local", relay.namespace)
    reasons = [event.get("reason") for event in await relay.events(uid)]
    assert "Dispatched" not in reasons, reasons


async def test_namespace_missing_on_the_workers_is_created_there(
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
    make_relay: Callable[[str], Awaitable[Relay]],
    clients: dict[str, ApiClient],
) -> None:
    namespace = await make_namespace(["manager"])
    relay = await make_relay(namespace)
    await relay.submit(job_manifest("faraway"))
    done = await relay.verify("faraway", outcome="Complete")
    created = await clients[done.cluster].get(NAMESPACES, namespace)
    assert created["metadata"]["name"] == namespace


async def test_mirror_refused_by_the_workers_is_reported_and_other_jobs_flow(
    relay: Relay,
    clients: dict[str, ApiClient],
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
    make_relay: Callable[[str], Awaitable[Relay]],
) -> None:
    # Every worker refuses any Job in this namespace (403 exceeded quota).
    for worker in relay.workers:
        await refuse_jobs(clients[worker], relay.namespace)
    other = await make_relay(await make_namespace(list(clients)))

    created = await relay.submit(job_manifest("refused"))
    uid = created["metadata"]["uid"]
    await other.submit(job_manifest("flowing"))

    warning = await relay.wait_event(
        uid,
        lambda event: (
            event.get("type") == "Warning"
            and any(
                word in (event.get("message") or "").lower()
                for word in ("quota", "forbidden", "rejected", "refused")
            )
        ),
        what="a Warning Event on the management Job about the refused mirror",
    )
    assert warning["involvedObject"]["name"] == "refused"
    await other.verify("flowing", outcome="Complete")

    job = await relay.get("refused")
    assert not finished(job), f"a Job that never ran shows a terminal status: {job.get('status')}"
    assert relay.mirror_uids(uid) == set()
    for worker in relay.workers:
        assert relay.jobs_named("refused", worker) == []
    relay.controller.assert_alive()
