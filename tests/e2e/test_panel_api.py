"""The panel's views through the manager's aggregation layer: who sees what, and watches.

The real path as in test_remote_logs.py: the controller serves and registers its
API, users call ``/apis/api.jobrelay.dev/v1alpha1/{fleet,queues,workloads}`` on the
manager's apiserver, which authorises the path (RBAC on ``api.jobrelay.dev``) and
forwards the identity; the controller then decides with SubjectAccessReviews what
that user may see.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.localfleet.cluster import Credential
from jobrelay.relayapi.route_rules import API_PATH
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.e2e.aggregated import (
    API_ARGS,
    api_available,
    manager_client,
    manager_get,
    user_kubeconfig,
)
from tests.e2e.conftest import NamespaceFactory
from tests.e2e.support import ControllerProcess, Relay
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

CONTROLLER_ARGS = API_ARGS
RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding",
                                 namespaced=False)  # fmt: skip
ROLES = Resource(RBAC, "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding", namespaced=True)
TENANT = "tenant-panel"


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, str]:
    return await api_available(controller, relay_fleet)


@pytest.fixture(scope="module")
def tenant(relay_fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return user_kubeconfig(relay_fleet, tmp_path_factory.mktemp("tenant"), TENANT)


def binding(name: str, kind: str, role: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": TENANT}]}  # fmt: skip


@pytest.fixture
async def granted(relay_fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    """The manager's admin client; the cluster-wide grants a test makes are removed after."""
    async with relay_fleet.client("manager") as manager:
        yield manager
        for resource, name in ((CLUSTER_ROLE_BINDINGS, "panel-gate"), (CLUSTER_ROLES, "panel-gate"),
                               (CLUSTER_ROLE_BINDINGS, "panel-fleet"),
                               (CLUSTER_ROLES, "panel-fleet")):  # fmt: skip
            try:
                await manager.delete(resource, name)
            except ApiError as error:
                if not error.is_not_found:
                    raise


async def test_the_fleet_view_as_a_tenant_without_get_workerclusters_is_refused(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str], tenant: Path,
    granted: ApiClient, make_namespace: NamespaceFactory,
) -> None:  # fmt: skip
    await relay.submit(job_manifest("mine"))
    other = await make_namespace(["manager"])
    await granted.create(relay.resource, job_manifest("theirs"), namespace=other)
    await relay.wait_finished("mine")

    # No grant on api.jobrelay.dev at all: the manager's apiserver refuses first.
    response = await manager_get(tenant, f"{API_PATH}/fleet")
    assert response.status_code == 403, response.text
    assert (
        'cannot list resource "fleet" in API group "api.jobrelay.dev"'
        in (response.json()["message"])
    )

    # Through the gate (the chart's -panel ClusterRole): the controller decides.
    await granted.create(CLUSTER_ROLES, {"metadata": {"name": "panel-gate"}, "rules": [{
        "apiGroups": ["api.jobrelay.dev"], "resources": ["dashboard", "fleet", "queues", "workloads"],
        "verbs": ["get", "list", "watch"]}]})  # fmt: skip
    await granted.create(CLUSTER_ROLE_BINDINGS, binding("panel-gate", "ClusterRole", "panel-gate"))
    for path, params, what in ((f"{API_PATH}/fleet", {}, "workerclusters"),
                               (f"{API_PATH}/fleet", {"watch": "true"}, "workerclusters"),
                               (f"{API_PATH}/queues", {}, "relayqueues")):  # fmt: skip
        response = await manager_get(tenant, path, **params)
        assert response.status_code == 403, response.text
        status = response.json()
        assert status["kind"] == "Status" and status["reason"] == "Forbidden"
        assert f'user "{TENANT}" cannot get {what}' in status["message"]

    # Workloads: only where the tenant may list them (a Role in its namespace); a
    # tenant who may list them nowhere is refused, not shown an empty list.
    response = await manager_get(tenant, f"{API_PATH}/workloads")
    assert response.status_code == 403, response.text
    assert response.json()["reason"] == "Forbidden"
    assert f'user "{TENANT}" cannot list' in response.json()["message"]
    await granted.create(ROLES, {"metadata": {"name": "jobs-reader"}, "rules": [{
        "apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}]},
        namespace=relay.namespace)  # fmt: skip
    await granted.create(ROLE_BINDINGS, binding("jobs-reader", "Role", "jobs-reader"),
                         namespace=relay.namespace)  # fmt: skip

    async def visible() -> list[dict[str, Any]] | None:
        # A refusal is remembered for a few seconds (the controller's review cache).
        found = await manager_get(tenant, f"{API_PATH}/workloads")
        return (found.json()["items"] or None) if found.status_code == 200 else None

    rows = await eventually(visible, timeout=30, what="the tenant's workloads")
    assert {(r["namespace"], r["name"]) for r in rows} == {(relay.namespace, "mine")}
    assert rows[0]["state"] == "Complete" and rows[0]["worker"] in relay_fleet.workers
    response = await manager_get(tenant, f"{API_PATH}/namespaces/{other}/workloads")
    assert response.status_code == 403, response.text

    # Allowed to get WorkerClusters: the fleet, both workers.
    await granted.create(CLUSTER_ROLES, {"metadata": {"name": "panel-fleet"}, "rules": [{
        "apiGroups": ["jobrelay.dev"], "resources": ["workerclusters"],
        "verbs": ["get", "list"]}]})  # fmt: skip
    await granted.create(
        CLUSTER_ROLE_BINDINGS, binding("panel-fleet", "ClusterRole", "panel-fleet")
    )

    async def fleet() -> list[dict[str, Any]] | None:
        found = await manager_get(tenant, f"{API_PATH}/fleet")
        return found.json()["items"] if found.status_code == 200 else None

    workers = await eventually(fleet, timeout=30, what="the fleet view allowed")
    assert sorted(w["name"] for w in workers) == sorted(relay_fleet.workers)
    assert all(w["connected"] == "True" and w["resources"] for w in workers)
    assert "server" not in json.dumps(workers)


async def test_a_watch_of_workloads_sees_a_job_run_and_complete(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    events_path = f"{API_PATH}/namespaces/{relay.namespace}/jobs/watched/events"
    seen: list[tuple[str, str]] = []
    both_sides: list[dict[str, Any]] = []
    async with await manager_client(admin) as http:
        path = f"{API_PATH}/namespaces/{relay.namespace}/workloads"
        async with http.stream("GET", path, params={"watch": "true"}, timeout=120) as response:
            assert response.status_code == 200
            await relay.submit(job_manifest(
                "watched", annotations={"fleet.jobrelay.dev/duration": "6s"}))  # fmt: skip
            async for line in response.aiter_lines():
                event = json.loads(line)
                if event["type"] == "BOOKMARK":
                    continue
                row = event["object"]
                assert row["name"] == "watched"
                seen.append((event["type"], row["state"]))
                if row["state"] == "Running" and not both_sides:
                    # While its mirror runs: Events from the manager and from its worker.
                    answer = await http.get(events_path)
                    assert answer.status_code == 200, answer.text
                    both_sides = answer.json()["items"]
                if row["state"] == "Complete":
                    break
    assert seen[0][0] == "ADDED" and seen[-1] == ("MODIFIED", "Complete")
    assert "Running" in {state for _, state in seen}  # passes a second apart: maybe ADDED so
    sides = {r["side"] for r in both_sides}
    assert "manager" in sides and sides - {"manager"} <= set(relay_fleet.workers), both_sides
    assert any(r["side"] == "manager" and r["reason"] == "Dispatched" for r in both_sides)
    assert any(r["side"] != "manager" and r["object"].startswith(("Pod/", "Job/"))
               for r in both_sides), both_sides  # fmt: skip


async def test_the_dashboard_is_served_through_the_manager(
    relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    page = await manager_get(admin, f"{API_PATH}/dashboard/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = await manager_get(admin, f"{API_PATH}/dashboard/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]


INTRUDER = "intruder-panel"


async def test_a_crowd_of_watches_that_may_list_nothing_is_refused_and_others_are_served(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str], granted: ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:  # fmt: skip
    """200 watches at once from an identity through the panel's gate that may list no
    workloads: each is 403 (none holds a place), and meanwhile another user's list
    answers 200 within 2 s."""
    await relay.submit(job_manifest("crowded"))
    intruder = user_kubeconfig(relay_fleet, tmp_path_factory.mktemp("intruder"), INTRUDER)
    await granted.create(CLUSTER_ROLES, {"metadata": {"name": "panel-gate"}, "rules": [{
        "apiGroups": ["api.jobrelay.dev"], "resources": ["dashboard", "fleet", "queues", "workloads"],
        "verbs": ["get", "list", "watch"]}]})  # fmt: skip
    gate = binding("panel-gate", "ClusterRole", "panel-gate")
    gate["subjects"][0]["name"] = INTRUDER
    await granted.create(CLUSTER_ROLE_BINDINGS, gate)
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    path = f"{API_PATH}/workloads"

    async def gate_open() -> bool | None:
        # The binding reaches the manager's authorizer: the controller refuses, not it.
        found = await manager_get(intruder, path)
        return (found.status_code == 403 and "namespace that has workloads" in found.text) or None

    await eventually(gate_open, timeout=30, what="the panel's gate open to the intruder")
    # One HTTP/2 connection carries the crowd: the test's own TLS handshakes are not
    # what is measured.
    crowd_client = await manager_client(intruder, http2=True)
    async with crowd_client as http, await manager_client(admin) as other:

        async def watch() -> tuple[int, dict[str, Any]]:
            async with http.stream("GET", path, params={"watch": "true"}) as response:
                return response.status_code, json.loads(await response.aread())

        crowd = [asyncio.create_task(watch()) for _ in range(200)]
        await asyncio.sleep(0)
        started = time.monotonic()
        answer = await other.get(path)
        elapsed = time.monotonic() - started
        refused = await asyncio.gather(*crowd)
    assert answer.status_code == 200, answer.text
    assert "crowded" in {row["name"] for row in answer.json()["items"]}
    assert elapsed < 2.0, f"another user's list took {elapsed:.2f} s"
    assert {code for code, _ in refused} == {403}, refused[:3]
    assert {status["reason"] for _, status in refused} == {"Forbidden"}
    assert all(f'user "{INTRUDER}" cannot list' in status["message"] for _, status in refused)


async def test_one_user_holds_at_most_its_share_of_the_watches(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    """The default --api-max-watches-per-user (20): the 21st watch of one user is 429,
    while another user still opens one."""
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    tenant = relay_fleet.kubeconfig("manager")  # the admin's certificate: another user name
    path = f"{API_PATH}/namespaces/{relay.namespace}/workloads"
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(await manager_client(admin, http2=True))
        for _ in range(ApiSettings().max_watches_per_user):
            response = await stack.enter_async_context(
                http.stream("GET", path, params={"watch": "true"}, timeout=60)
            )
            assert response.status_code == 200
        refused = await http.get(path, params={"watch": "true"})
        assert refused.status_code == 429, refused.text
        assert refused.json()["reason"] == "TooManyRequests"
        assert "panel watches open, the most one user may" in refused.json()["message"]
        other = await stack.enter_async_context(await manager_client(tenant))
        async with other.stream("GET", path, params={"watch": "true"}, timeout=60) as response:
            assert response.status_code == 200
