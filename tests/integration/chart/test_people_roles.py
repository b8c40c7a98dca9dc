"""charts/jobrelay templates/aggregated-roles.yaml: which ClusterRoles and bindings each
value set renders, and a server-side dry run of them on the local manager (v1.35)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient
from tests.conftest import FleetHandle
from tests.integration.chart.workerchart import MANAGER_CHART, RESOURCES, helm, values_file

AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
WORKER_CLUSTERS = ("jobrelay.dev", "workerclusters")
READERS = [{"kind": "Group", "name": "system:authenticated"},
           {"kind": "ServiceAccount", "name": "dashboards", "namespace": "monitoring"},
           {"kind": "ServiceAccount", "name": "ours"}]  # fmt: skip
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "readers": {"rbac": {"fleetReaders": READERS}},
    "readers-only": {"rbac": {"aggregateToDefaultRoles": False, "fleetReaders": READERS}},
    "jobsets": {"kinds": [{"name": "Job.v1.batch", "resource": "jobs"},
                          {"name": "JobSet.v1alpha2.jobset.x-k8s.io", "resource": "jobsets"}]},
}  # fmt: skip


def roles(values: dict[str, Any], namespace: str = "ops") -> list[dict[str, Any]]:
    """What templates/aggregated-roles.yaml renders (nothing: [])."""
    path = values_file({"fullnameOverride": "relay", **values})
    try:
        done = helm("template", "relay", str(MANAGER_CHART), "-n", namespace, "-f", str(path),
                    "-s", "templates/aggregated-roles.yaml", check=False)  # fmt: skip
    finally:
        path.unlink()
    if done.returncode != 0 and "could not find template" in done.stderr:
        return []  # helm's answer when the template renders nothing
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def verbs_on(role: dict[str, Any], group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in role["rules"]
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


def aggregated(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ClusterRoles aggregated to the built-in ones (not the dashboard's gate)."""
    return {
        obj["metadata"]["name"]: obj
        for obj in roles(values)
        if not obj["metadata"]["name"].endswith("-panel")
    }


def test_default_roles_aggregate_view_edit_and_admin() -> None:
    by_name = aggregated({})
    assert sorted(by_name) == [
        "relay-fleet-admin", "relay-fleet-edit", "relay-fleet-view", "relay-workloads-view",
    ]  # fmt: skip
    expected = {
        "relay-fleet-view": ("view", {"get", "list", "watch"}),
        "relay-fleet-edit": ("edit", {"get", "list", "watch", "patch"}),
        "relay-fleet-admin": ("admin", {"get", "list", "watch", "patch", "delete"}),
    }
    for name, (level, verbs) in expected.items():
        labels = by_name[name]["metadata"]["labels"]
        assert {key for key in labels if key.startswith(AGGREGATE)} == {AGGREGATE + level}
        assert labels[AGGREGATE + level] == "true"
        assert verbs_on(by_name[name], *WORKER_CLUSTERS) == verbs
    # Never a Secret, never a wildcard, never a create of a WorkerCluster: `clusters add`
    # is for cluster admins. Fleet admins define the queues; viewers read them.
    for role in by_name.values():
        for rule in role["rules"]:
            assert "secrets" not in rule["resources"] and "*" not in rule["verbs"]
            assert "create" not in rule["verbs"] or rule["resources"] == ["relayqueues"]
    queues = ("jobrelay.dev", "relayqueues")
    assert verbs_on(by_name["relay-fleet-view"], *queues) == {"get", "list", "watch"}
    assert verbs_on(by_name["relay-fleet-admin"], *queues) == {
        "get", "list", "watch", "create", "update", "patch", "delete",
    }  # fmt: skip
    assert verbs_on(by_name["relay-workloads-view"], "batch", "jobs") == {"get", "list", "watch"}
    # The aggregated API: a workload's logs, mirror and Events, the workload table in a
    # namespace the reader views.
    api = "api.jobrelay.dev"
    for sub in ("log", "mirror", "events"):
        assert verbs_on(by_name["relay-workloads-view"], api, f"jobs/{sub}") == {"get"}
    assert verbs_on(by_name["relay-workloads-view"], api, "workloads") == {"get", "list", "watch"}
    assert verbs_on(by_name["relay-workloads-view"], api, "pendingworkloads") == {
        "get", "list", "watch",
    }  # fmt: skip


def test_every_authenticated_user_reaches_the_dashboard_and_the_controller_decides_the_rest() -> (
    None
):
    panel = {o["kind"]: o for o in roles({}) if o["metadata"]["name"] == "relay-panel"}
    role = panel["ClusterRole"]
    assert not [key for key in role["metadata"]["labels"] if key.startswith(AGGREGATE)]
    for resource in ("dashboard", "fleet", "queues", "workloads", "pendingworkloads"):
        assert verbs_on(role, "api.jobrelay.dev", resource) == {"get", "list", "watch"}
    assert [rule["apiGroups"] for rule in role["rules"]] == [["api.jobrelay.dev"]]
    binding = panel["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "relay-panel"
    assert binding["subjects"] == [{"kind": "Group", "name": "system:authenticated",
                                    "apiGroup": "rbac.authorization.k8s.io"}]  # fmt: skip
    without = roles({"api": {"dashboardForAllAuthenticated": False}})
    assert [o["kind"] for o in without if o["metadata"]["name"] == "relay-panel"] == ["ClusterRole"]
    assert not [o for o in roles({"api": {"enabled": False}}) if "panel" in o["metadata"]["name"]]


def test_fleet_readers_are_bound_cluster_wide_to_the_view_level_role_only() -> None:
    [binding] = [obj for obj in aggregated(VALUE_SETS["readers"]).values()
                 if obj["kind"] == "ClusterRoleBinding"]  # fmt: skip
    assert binding["roleRef"]["name"] == "relay-fleet-view"
    assert binding["subjects"] == [
        {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": "dashboards", "namespace": "monitoring"},
        {"kind": "ServiceAccount", "name": "ours", "namespace": "ops"},  # the controller's
    ]


def test_without_aggregation_readers_still_get_their_role_unaggregated() -> None:
    by_name = aggregated(VALUE_SETS["readers-only"])
    assert sorted(by_name) == ["relay-fleet-readers", "relay-fleet-view"]
    labels = by_name["relay-fleet-view"]["metadata"]["labels"]
    assert not [key for key in labels if key.startswith(AGGREGATE)]
    assert aggregated({"rbac": {"aggregateToDefaultRoles": False}}) == {}


def test_each_kind_is_readable_through_view() -> None:
    [workloads] = [
        o for o in roles(VALUE_SETS["jobsets"]) if o["metadata"]["name"] == "relay-workloads-view"
    ]
    assert verbs_on(workloads, "jobset.x-k8s.io", "jobsets") == {"get", "list", "watch"}
    assert verbs_on(workloads, "jobset.x-k8s.io", "jobsets/status") == {"get", "list", "watch"}


def test_a_subject_without_a_kind_is_refused() -> None:
    done = helm("template", "relay", str(MANAGER_CHART), "--set", "rbac.fleetReaders[0].name=x",
                check=False)  # fmt: skip
    # The template's message, or the schema's where one describes rbac.fleetReaders.
    assert done.returncode != 0 and "kind" in done.stderr, done.stderr


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("manager"), cluster="manager") as made:
        yield made


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
async def test_the_roles_pass_a_server_side_dry_run(name: str, manager: ApiClient) -> None:
    for obj in roles(VALUE_SETS[name]):
        stored = await manager.create(RESOURCES[obj["kind"]], obj, dry_run=True)
        assert stored["metadata"]["name"] == obj["metadata"]["name"]
