"""Dependencies follow the workload (issue 23), on the local fleet.

A Job mounting a ConfigMap, reading a Secret by envFrom, pulling with imagePullSecrets
and running as its own ServiceAccount completes on a worker, which holds copies with
the same data and jobrelay's marks, and no owner per mirror; a ConfigMap edited on the
manager reaches the worker within 10 s; once the mirror goes (jobrelay deletes a
finished Job's mirror) the leader's copy janitor deletes the copies no workload there
uses. One Secret of 512 KiB shared by 200 Jobs on one worker is written there a
bounded number of times (the worker's own apiserver_request_total), never once per
mirror. A Job naming a missing ConfigMap is held with MissingDependency until it is
created. A ConfigMap of the same name that jobrelay did not make on a worker is never
overwritten, and that worker is passed over with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from jobrelay.dependencies.copy_rules import RESOURCES
from jobrelay.fleet.workerclusters import default_origin
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS
from jobrelay.vocabulary.names import (
    COPY_LABEL,
    DIGEST_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    ORIGIN_LABEL,
    SOURCE_UID_ANNOTATION,
)
from tests.conftest import FleetHandle
from tests.e2e.aggregated import manager_client
from tests.e2e.support import Relay, placement
from tests.e2e.test_capacity_placement import wait_held
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

CONFIGMAPS, SECRETS, SERVICEACCOUNTS = (
    RESOURCES["configmap"],
    RESOURCES["secret"],
    RESOURCES["serviceaccount"],
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def configmap(name: str, data: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}


def with_dependencies(manifest: dict[str, Any], *, config: str = "settings") -> dict[str, Any]:
    """``manifest``'s pods mounting ConfigMap ``config``, reading Secret ``creds`` by
    envFrom, pulling with Secret ``regcred``, as ServiceAccount ``runner``."""
    spec = manifest["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "settings", "configMap": {"name": config}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "settings", "mountPath": "/etc/settings"}]
    spec["containers"][0]["envFrom"] = [{"secretRef": {"name": "creds"}}]
    spec["imagePullSecrets"] = [{"name": "regcred"}]
    spec["serviceAccountName"] = "runner"
    return manifest


async def create_sources(manager: ApiClient, namespace: str) -> None:
    await manager.create(CONFIGMAPS, configmap("settings", {"mode": "fast"}), namespace=namespace)
    await manager.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "type": "Opaque",
         "data": {"PASSWORD": _b64("hunter2")}},
        namespace=namespace,
    )  # fmt: skip
    docker = '{"auths":{"registry.example.com":{"auth":"' + _b64("u:p") + '"}}}'
    await manager.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "regcred"},
         "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": _b64(docker)}},
        namespace=namespace,
    )  # fmt: skip
    await manager.create(
        SERVICEACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner"},
         "automountServiceAccountToken": False, "imagePullSecrets": [{"name": "regcred"}]},
        namespace=namespace,
    )  # fmt: skip


async def read(client: ApiClient, resource: Any, name: str, namespace: str) -> Any:
    try:
        return await client.get(resource, name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            return None
        raise


def assert_copy_marks(copy: Mapping[str, Any], source: Mapping[str, Any], origin: str) -> None:
    metadata = copy["metadata"]
    labels = metadata.get("labels") or {}
    assert labels.get(ORIGIN_LABEL) == origin and labels.get(COPY_LABEL), labels
    annotations = metadata.get("annotations") or {}
    assert annotations.get(SOURCE_UID_ANNOTATION) == source["metadata"]["uid"], annotations
    assert annotations.get(DIGEST_ANNOTATION), annotations


async def test_a_job_with_its_configmap_secret_pull_secret_and_account_runs_with_copies(
    relay: Relay, clients: dict[str, ApiClient], namespace: str
) -> None:
    manager = clients["manager"]
    origin = await default_origin(manager)
    await create_sources(manager, namespace)
    # Long enough to edit the ConfigMap while its mirror runs.
    manifest = job_manifest("with-deps", annotations={"fleet.jobrelay.dev/duration": "30s"})
    job = await relay.submit(with_dependencies(manifest))
    uid = job["metadata"]["uid"]
    worker, _mirror = await relay.wait_mirror(uid)
    remote = clients[worker]

    # The copies: same data, our marks, no owner per mirror.
    expected = {
        (CONFIGMAPS, "settings"): ("data",),
        (SECRETS, "creds"): ("type", "data"),
        (SECRETS, "regcred"): ("type", "data"),
        (SERVICEACCOUNTS, "runner"): ("automountServiceAccountToken",),
    }

    async def made_copies() -> dict[str, Any] | None:
        found = {}
        for (resource, name), _ in expected.items():
            copy = await read(remote, resource, name, namespace)
            if copy is None:
                return None
            found[f"{resource.kind}/{name}"] = copy
        return found

    copies = await eventually(made_copies, timeout=30, what="the copies on the worker")
    for (resource, name), fields in expected.items():
        source = await manager.get(resource, name, namespace=namespace)
        copy = copies[f"{resource.kind}/{name}"]
        for field in fields:
            assert copy.get(field) == source.get(field), (name, field, copy.get(field))
        assert_copy_marks(copy, source, origin)
        assert "ownerReferences" not in copy["metadata"], copy["metadata"]
    # Permissions do not follow: the account is copied without its pull secrets.
    assert "imagePullSecrets" not in copies["ServiceAccount/runner"]
    assert "secrets" not in copies["ServiceAccount/runner"]

    # An edit on the manager reaches the worker within 10 s.
    await manager.patch(CONFIGMAPS, "settings", {"data": {"mode": "careful"}}, namespace=namespace)
    edited = time.monotonic()

    async def updated() -> bool:
        copy = await read(remote, CONFIGMAPS, "settings", namespace)
        return copy is not None and copy.get("data") == {"mode": "careful"}

    await eventually(updated, timeout=10, what="the edited ConfigMap copied to the worker")
    assert time.monotonic() - edited <= 10.0

    # It completes; jobrelay deletes the finished mirror, and then the copies no
    # workload on that worker uses any more.
    done = await relay.verify("with-deps", outcome="Complete", timeout=120)
    assert done.cluster == worker

    async def copies_gone() -> bool:
        for resource, name in expected:
            if await read(remote, resource, name, namespace) is not None:
                return False
        return True

    await eventually(copies_gone, timeout=30, what="the copies deleted after the mirror")
    # The manager's own are untouched.
    for resource, name in expected:
        assert await read(manager, resource, name, namespace) is not None


async def test_a_job_naming_a_missing_configmap_waits_for_it(
    relay: Relay, clients: dict[str, ApiClient], namespace: str
) -> None:
    manager = clients["manager"]
    await create_sources(manager, namespace)
    manifest = with_dependencies(job_manifest("waits"), config="late")
    job = await relay.submit(manifest)
    event = await relay.wait_event(
        job["metadata"]["uid"], lambda e: e.get("reason") == "MissingDependency",
        what="a MissingDependency Event",
    )  # fmt: skip
    assert event["type"] == "Warning" and event["message"].startswith("configmap/late "), event
    job = await relay.get("waits")
    assert not placement(job), placement(job)
    note = (job["metadata"].get("annotations") or {}).get(NOT_PLACED_ANNOTATION, "")
    assert note.startswith("MissingDependency: configmap/late "), note
    for worker in relay.workers:
        assert not (await clients[worker].list(JOBS, namespace=namespace)).items

    await manager.create(CONFIGMAPS, configmap("late", {"ready": "yes"}), namespace=namespace)
    done = await relay.verify("waits", outcome="Complete", timeout=60)
    assert placement(done.job) == done.cluster


async def test_a_foreign_configmap_is_never_overwritten_and_its_worker_passed_over(
    relay: Relay, clients: dict[str, ApiClient], namespace: str
) -> None:
    manager = clients["manager"]
    await create_sources(manager, namespace)
    first, second = relay.workers[0], relay.workers[1]
    theirs = await clients[first].create(
        CONFIGMAPS, configmap("settings", {"owner": "someone else"}), namespace=namespace
    )
    # The first worker first, the second if it cannot.
    ordered = {"jobrelay.dev/placement": "ordered", "jobrelay.dev/clusters": f"{first},{second}"}
    manifest = with_dependencies(job_manifest("elsewhere"))
    manifest["metadata"]["annotations"] = ordered
    job = await relay.submit(manifest)
    done = await relay.verify("elsewhere", outcome="Complete", timeout=90)
    assert done.cluster == second, done.cluster
    reason = f"configmap/settings in {namespace} was not made by jobrelay"
    await relay.wait_event(
        job["metadata"]["uid"],
        lambda e: e.get("reason") == "ForeignDependency" and reason in (e.get("message") or ""),
        what="a ForeignDependency Event",
    )
    kept = await clients[first].get(CONFIGMAPS, "settings", namespace=namespace)
    assert kept["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert kept.get("data") == {"owner": "someone else"}
    assert not (await clients[first].list(JOBS, namespace=namespace)).items

    # Allowed only there, a Job is held, and the explanation says why.
    only_first = with_dependencies(job_manifest("only-there"))
    only_first["metadata"]["annotations"] = {"jobrelay.dev/clusters": first}
    await relay.submit(only_first)
    message = await wait_held(relay, "only-there")
    assert f"{first}: {reason}" in message, message


SHARED_JOBS = 200
# PUT and PATCH (and server-side apply) of Secrets on the worker while they run: the
# copy is made once (a POST) and rewritten only if its source changes.
MAX_SECRET_WRITES = 10
_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


async def secret_requests(fleet: FleetHandle, worker: str) -> Counter[str]:
    """The worker apiserver's own count of requests on Secrets, by verb (all namespaces:
    per object counts are not in the metric; nothing else writes Secrets there now)."""
    async with await manager_client(fleet.kubeconfig(worker)) as http:
        response = await http.get("/metrics")
    response.raise_for_status()
    counts: Counter[str] = Counter()
    for line in response.text.splitlines():
        found = _REQUESTS.match(line)
        if found is None:
            continue
        labels = dict(_LABEL.findall(found["labels"]))
        if labels.get("resource") == "secrets" and not labels.get("subresource"):
            counts[labels.get("verb", "")] += int(float(found["value"]))
    return counts


async def test_one_secret_shared_by_200_jobs_on_one_worker_is_written_a_bounded_number_of_times(
    relay: Relay, relay_fleet: FleetHandle, clients: dict[str, ApiClient], namespace: str
) -> None:
    manager, worker = clients["manager"], relay.workers[0]
    blob = base64.b64encode(os.urandom(512 * 1024)).decode()
    await manager.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "shared"},
         "type": "Opaque", "data": {"blob": blob}},
        namespace=namespace,
    )  # fmt: skip
    before = await secret_requests(relay_fleet, worker)

    def shared(name: str) -> dict[str, Any]:
        manifest = job_manifest(name, cpu="10m")
        manifest["metadata"]["annotations"] = {"jobrelay.dev/clusters": worker}
        spec = manifest["spec"]["template"]["spec"]
        spec["volumes"] = [{"name": "shared", "secret": {"secretName": "shared"}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
        return manifest

    names = [f"shared-{i:03d}" for i in range(SHARED_JOBS)]
    for start in range(0, SHARED_JOBS, 50):  # a few at a time: the manager's own writes
        await asyncio.gather(*(relay.submit(shared(name)) for name in names[start : start + 50]))

    async def all_complete() -> list[dict[str, Any]] | None:
        jobs = (await manager.list(JOBS, namespace=namespace)).items
        done = [job for job in jobs if any(
            c.get("type") == "Complete" and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or [])]  # fmt: skip
        return done if len(done) == SHARED_JOBS else None

    done = await eventually(all_complete, timeout=110, interval=1.0,
                            what=f"{SHARED_JOBS} Jobs sharing one Secret complete")  # fmt: skip
    assert {placement(job) for job in done} == {worker}
    after = await secret_requests(relay_fleet, worker)
    grown = {verb: after[verb] - before.get(verb, 0) for verb in after}
    writes = sum(grown.get(verb, 0) for verb in ("PUT", "PATCH", "APPLY"))
    assert grown.get("POST", 0) >= 1, grown  # the copy was made
    assert writes <= MAX_SECRET_WRITES, grown
