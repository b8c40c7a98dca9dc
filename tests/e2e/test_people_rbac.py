"""RBAC for people on the manager: charts/jobrelay/templates/aggregated-roles.yaml rendered
(`helm template -s`) and applied, then the real CLI run as ServiceAccounts bound to the
built-in roles, each with a kubeconfig holding only its own token.

* bound cluster-wide to ``view``: `jobrelay clusters list` and `jobrelay top` work, cordon
  is refused;
* bound to ``view`` only in the controller's namespace: WorkerClusters are cluster-scoped,
  so that grants nothing on them (`clusters list` is refused), until the chart's
  ``rbac.fleetReaders`` names it;
* bound to ``edit``: cordon, drain and uncordon work, removing does not;
* bound to ``admin``: cordon and drain work, and `jobrelay clusters remove`.

No controller runs: the WorkerCluster used is one of the test's own, pointing nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.controller.options import lease_name_for
from jobrelay.fleet import serviceaccount, workerclusters
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES, WORKER_CLUSTERS
from jobrelay.vocabulary.names import KINDS_ANNOTATION, VERSION_ANNOTATION
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.integration.chart.workerchart import (
    MANAGER_CHART,
    RESOURCES,
    mint_token,
    render,
    token_kubeconfig,
)
from tests.kubetools import eventually

pytestmark = pytest.mark.e2e

CONTROLLER_NAMESPACE = workerclusters.DEFAULT_NAMESPACE
ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True
)
KINDS = [
    {"name": "Job.v1.batch", "resource": "jobs"},
    {"name": "JobSet.v1alpha2.jobset.x-k8s.io", "resource": "jobsets"},
]
# Who is who: how each ServiceAccount is bound (cluster-wide to a built-in role, or in the
# controller's namespace only).
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
READER_RESOURCES = {
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True),
    "RoleBinding": ROLE_BINDINGS,
}
# A controller name of this test's own: its Lease is no other module's.
VERSION_CONTROLLER = "people-version.jobrelay.dev/relay"
PEOPLE = {"viewer": "view", "editor": "edit", "admin": "admin", "tenant": None, "reader": None}
CLI_TIMEOUT = 120.0


@dataclass
class Fleet:
    """The test's WorkerCluster and a kubeconfig file per person."""

    worker: str
    kubeconfigs: dict[str, Path]


@dataclass
class People:
    """A kubeconfig file per person (the module's roles, bindings and ServiceAccounts)."""

    kubeconfigs: dict[str, Path]


async def cli(kubeconfig: Path, *args: str) -> tuple[int, str]:
    """`python -m jobrelay ARGS` as a user runs it, with only $KUBECONFIG pointing at
    ``kubeconfig``: exit code and output."""
    env = {key: value for key, value in os.environ.items() if key != "JOBRELAY_KUBECONFIG"}
    env["KUBECONFIG"] = str(kubeconfig)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), timeout=CLI_TIMEOUT)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def ok(kubeconfig: Path, *args: str) -> str:
    code, output = await cli(kubeconfig, *args)
    assert code == 0, f"jobrelay {' '.join(args)} as {kubeconfig.stem} exited {code}:\n{output}"
    return output


async def refused(kubeconfig: Path, *args: str) -> str:
    code, output = await cli(kubeconfig, *args)
    assert code == 1, f"jobrelay {' '.join(args)} as {kubeconfig.stem} exited {code}:\n{output}"
    assert "refused" in output and "Traceback" not in output, output
    return output


def _binding(kind: str, name: str, role: str, subject: str, namespace: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if kind == "RoleBinding":
        metadata["namespace"] = CONTROLLER_NAMESPACE
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": namespace}],
    }  # fmt: skip


async def aggregated(manager: ApiClient, role: str, verb: str) -> bool:
    """Has the aggregation controller folded the chart's rules into built-in ``role``?"""
    rules = (await manager.get(serviceaccount.CLUSTER_ROLES, role)).get("rules") or []
    return any(
        "workerclusters" in (rule.get("resources") or []) and verb in (rule.get("verbs") or [])
        for rule in rules
    )


@pytest.fixture(scope="module")
async def everyone(
    fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[People]:
    """The chart's roles applied, and the people bound, once for the module (the
    aggregation controller then settles once)."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"people-{suffix}"
    tmp_path = tmp_path_factory.mktemp("people")
    async with (
        fleet.client("manager") as manager,
        bound(fleet, manager, namespace, suffix, tmp_path) as people,
    ):
        yield people


@contextlib.asynccontextmanager
async def bound(
    fleet: FleetHandle, manager: ApiClient, namespace: str, suffix: str, tmp_path: Path
) -> AsyncIterator[People]:
    rendered = render(
        MANAGER_CHART,
        {"fullnameOverride": f"jobrelay-{suffix}", "kinds": KINDS,
         "rbac": {"aggregateToDefaultRoles": True,
                  "fleetReaders": [{"kind": "ServiceAccount", "name": "reader",
                                    "namespace": namespace}]}},
        namespace=CONTROLLER_NAMESPACE, show_only=["templates/aggregated-roles.yaml"],
    )  # fmt: skip
    bindings = [
        _binding("ClusterRoleBinding", f"{namespace}-{person}", role, person, namespace)
        for person, role in PEOPLE.items() if role
    ] + [
        _binding("RoleBinding", f"{namespace}-{person}", "view", person, namespace)
        for person in ("tenant", "reader")
    ]  # fmt: skip
    made: list[dict[str, Any]] = []
    try:
        await workerclusters.ensure_namespace(manager, CONTROLLER_NAMESPACE)
        await manager.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": namespace}})  # fmt: skip
        for person in PEOPLE:
            await manager.create(serviceaccount.SERVICE_ACCOUNTS, {
                "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": person}},
                namespace=namespace)  # fmt: skip
        for obj in [*rendered, *bindings]:
            resource = RESOURCES.get(obj["kind"]) or ROLE_BINDINGS
            await manager.patch(
                resource, obj["metadata"]["name"], obj, namespace=obj["metadata"].get("namespace"),
                patch_type=PatchType.APPLY, field_manager="people-rbac-test", force=True,
            )  # fmt: skip
            made.append(obj)
        for role, verb in (("view", "list"), ("edit", "patch"), ("admin", "delete")):

            async def done(role: str = role, verb: str = verb) -> bool:
                return await aggregated(manager, role, verb)

            await eventually(done, timeout=60, what=f"workerclusters {verb} aggregated into {role}")
        kubeconfigs = {}
        for person in PEOPLE:
            token = await mint_token(manager, namespace, person)
            path = tmp_path / f"{person}.kubeconfig"
            path.touch(mode=0o600)
            path.write_text(
                yaml.safe_dump(
                    token_kubeconfig(fleet.kubeconfig("manager"), "manager", person, token)
                )
            )
            kubeconfigs[person] = path
        yield People(kubeconfigs)
    finally:
        for obj in reversed(made):
            with contextlib.suppress(ApiError):
                await manager.delete(
                    RESOURCES.get(obj["kind"]) or ROLE_BINDINGS, obj["metadata"]["name"],
                    namespace=obj["metadata"].get("namespace"),
                )  # fmt: skip
        with contextlib.suppress(ApiError):
            await manager.delete(NAMESPACES, namespace)


@pytest.fixture
async def people(everyone: People, clients: dict[str, ApiClient]) -> AsyncIterator[Fleet]:
    """A WorkerCluster of the test's own, pointing nowhere; deleted after."""
    worker = f"people-{uuid.uuid4().hex[:6]}"
    await clients["manager"].create(WORKER_CLUSTERS, {
        "apiVersion": WORKER_CLUSTERS.api_version, "kind": WORKER_CLUSTERS.kind,
        "metadata": {"name": worker},
        "spec": {"kubeconfigSecretRef": {"name": workerclusters.secret_name(worker)}},
    })  # fmt: skip
    try:
        yield Fleet(worker, everyone.kubeconfigs)
    finally:
        with contextlib.suppress(ApiError):
            await clients["manager"].delete(WORKER_CLUSTERS, worker)


async def spec_of(manager: ApiClient, worker: str) -> dict[str, Any]:
    spec: dict[str, Any] = (await manager.get(WORKER_CLUSTERS, worker)).get("spec") or {}
    return spec


async def test_view_reads_the_fleet_and_cannot_cordon(
    people: Fleet, clients: dict[str, ApiClient]
) -> None:
    viewer = people.kubeconfigs["viewer"]
    assert people.worker in await ok(viewer, "clusters", "list")
    assert people.worker in await ok(viewer, "clusters")
    assert people.worker in await ok(viewer, "top", "--once")
    await refused(viewer, "clusters", "cordon", people.worker)
    await refused(viewer, "clusters", "drain", people.worker, "--no-wait")
    assert not (await spec_of(clients["manager"], people.worker)).get("cordoned")


async def test_view_in_the_controllers_namespace_alone_reads_no_worker_fleet_readers_do(
    people: Fleet,
) -> None:
    await refused(people.kubeconfigs["tenant"], "clusters", "list")
    assert people.worker in await ok(people.kubeconfigs["reader"], "clusters", "list")
    await refused(people.kubeconfigs["reader"], "clusters", "cordon", people.worker)


async def test_edit_cordons_and_drains_but_does_not_remove(
    people: Fleet, clients: dict[str, ApiClient]
) -> None:
    editor, manager = people.kubeconfigs["editor"], clients["manager"]
    await ok(editor, "clusters", "cordon", people.worker)
    assert (await spec_of(manager, people.worker)).get("cordoned") is True
    await ok(editor, "clusters", "drain", people.worker, "--no-wait")
    assert (await spec_of(manager, people.worker)).get("drain") == "NotStarted"
    await ok(editor, "clusters", "uncordon", people.worker)
    spec = await spec_of(manager, people.worker)
    assert not spec.get("cordoned") and not spec.get("drain"), spec
    async with ApiClient.from_kubeconfig(editor, cluster="manager") as as_editor:
        with pytest.raises(ApiError) as refusal:
            await as_editor.delete(WORKER_CLUSTERS, people.worker)
        assert refusal.value.code == 403


async def test_admin_cordons_drains_and_removes(
    people: Fleet, clients: dict[str, ApiClient]
) -> None:
    admin, manager = people.kubeconfigs["admin"], clients["manager"]
    await ok(admin, "clusters", "cordon", people.worker)
    await ok(admin, "clusters", "drain", people.worker, "--no-wait")
    assert (await spec_of(manager, people.worker)).get("drain") == "NotStarted"
    # No controller reports on this worker and its kubeconfig Secret does not exist:
    # --force removes it anyway (reporting what it could not clean).
    await ok(admin, "clusters", "remove", people.worker, "--force", "--timeout", "0")
    with pytest.raises(ApiError) as gone:
        await manager.get(WORKER_CLUSTERS, people.worker)
    assert gone.value.is_not_found


async def test_any_signed_in_user_reads_the_leaders_version(
    people: Fleet, clients: dict[str, ApiClient]
) -> None:
    """The chart's reader Role lets every authenticated user `get` the leader's Lease by
    name, where `jobrelay version` and `jobrelay get` read the version and the kinds; the
    tenant has no role in the controller's namespace but that one."""
    manager, suffix = clients["manager"], uuid.uuid4().hex[:6]
    rendered = [
        obj
        for obj in render(
            MANAGER_CHART,
            {"fullnameOverride": f"jobrelay-{suffix}", "controllerName": VERSION_CONTROLLER},
            namespace=CONTROLLER_NAMESPACE,
            show_only=["templates/rbac.yaml"],
        )
        if obj["metadata"]["name"].endswith("-api-reader")
    ]
    assert {obj["kind"] for obj in rendered} == {"Role", "RoleBinding"}, rendered
    lease_name = lease_name_for(VERSION_CONTROLLER)
    lease = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease_name, "annotations": {
            VERSION_ANNOTATION: "9.8.7", KINDS_ANNOTATION: "Job.v1.batch"}},
        # Renewed now and for long: a fresh leader (a stale one adds a warning).
        "spec": {"holderIdentity": "people-version-leader", "leaseDurationSeconds": 3600,
                 "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    }  # fmt: skip
    tenant = people.kubeconfigs["tenant"]
    version = ("version", "--controller-name", VERSION_CONTROLLER, "-o", "json")
    await manager.create(LEASES, lease, namespace=CONTROLLER_NAMESPACE)
    try:
        code, output = await cli(tenant, *version)
        assert code == 1 and "Traceback" not in output, output  # no role yet: refused
        for obj in rendered:
            await manager.patch(
                READER_RESOURCES[obj["kind"]], obj["metadata"]["name"], obj,
                namespace=CONTROLLER_NAMESPACE, patch_type=PatchType.APPLY,
                field_manager="people-rbac-test", force=True,
            )  # fmt: skip
        answer = yaml.safe_load((await ok(tenant, *version)).strip())
        assert answer["serverVersion"]["version"] == "9.8.7", answer
    finally:
        with contextlib.suppress(ApiError):
            await manager.delete(LEASES, lease_name, namespace=CONTROLLER_NAMESPACE)
        for obj in rendered:
            with contextlib.suppress(ApiError):
                await manager.delete(
                    READER_RESOURCES[obj["kind"]], obj["metadata"]["name"],
                    namespace=CONTROLLER_NAMESPACE,
                )  # fmt: skip
