"""Dependencies follow the workload (issue 23), on the local fleet.

A Job mounting a ConfigMap, reading a Secret by envFrom, pulling with imagePullSecrets
and running as its own ServiceAccount completes on a worker, which holds copies with
the same data and jobrelay's marks, owned by the mirror; a ConfigMap edited on the
manager reaches the worker within 10 s; once the mirror goes (jobrelay deletes a
finished Job's mirror) the worker's garbage collector (its real kube-controller-manager)
removes the copies. A Job naming a missing ConfigMap is held with MissingDependency
until it is created. A ConfigMap of the same name that jobrelay did not make on a
worker is never overwritten, and that worker is passed over with the reason.
"""

from __future__ import annotations

import base64
import time
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
    worker, mirror = await relay.wait_mirror(uid)
    remote = clients[worker]

    # The copies: same data, our marks, owned by the mirror.
    mirror_uid = mirror["metadata"]["uid"]
    expected = {
        (CONFIGMAPS, "settings"): ("data",),
        (SECRETS, "creds"): ("type", "data"),
        (SECRETS, "regcred"): ("type", "data"),
        (SERVICEACCOUNTS, "runner"): ("automountServiceAccountToken",),
    }

    async def owned_copies() -> dict[str, Any] | None:
        found = {}
        for (resource, name), _ in expected.items():
            copy = await read(remote, resource, name, namespace)
            owners = [o.get("uid") for o in (copy or {}).get("metadata", {}).get(
                "ownerReferences") or []]  # fmt: skip
            if copy is None or mirror_uid not in owners:
                return None
            found[f"{resource.kind}/{name}"] = copy
        return found

    copies = await eventually(owned_copies, timeout=30, what="copies owned by the mirror")
    for (resource, name), fields in expected.items():
        source = await manager.get(resource, name, namespace=namespace)
        copy = copies[f"{resource.kind}/{name}"]
        for field in fields:
            assert copy.get(field) == source.get(field), (name, field, copy.get(field))
        assert_copy_marks(copy, source, origin)
        owner = next(o for o in copy["metadata"]["ownerReferences"] if o["uid"] == mirror_uid)
        assert (owner["kind"], owner["name"]) == ("Job", "with-deps"), owner
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

    # It completes; jobrelay deletes the finished mirror, and the worker's garbage
    # collector the copies it owned.
    done = await relay.verify("with-deps", outcome="Complete", timeout=120)
    assert done.cluster == worker

    async def copies_gone() -> bool:
        for resource, name in expected:
            if await read(remote, resource, name, namespace) is not None:
                return False
        return True

    await eventually(copies_gone, timeout=30, what="the copies garbage-collected with the mirror")
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
