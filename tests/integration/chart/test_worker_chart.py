"""charts/jobrelay-worker: lint (helm 3 and 4), its files/worker-access.yaml filled in for
its values (each kind's rules, the namespace create verb) as `clusters add
--create-service-account` fills it in for the same inputs, value checks, and a server-side
dry run of every object on a local worker (Kubernetes v1.35)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.fleet import serviceaccount
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES
from jobrelay.manifests import worker_access
from jobrelay.vocabulary.names import ORIGIN_LABEL
from tests.conftest import FleetHandle
from tests.integration.chart.workerchart import (
    RELEASE_LABELS,
    RESOURCES,
    WORKER_CHART,
    Inputs,
    helm,
    render,
    tools,
    values_file,
    without_release_labels,
)

JOBSET = {"name": "JobSet.v1alpha2.jobset.x-k8s.io", "resource": "jobsets"}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {"origin": "manager-a"},
    # A UID origin, two kinds (one twice), no namespace creation, no token Secret, two
    # namespaces opened, the account's namespace not the release's.
    "uid-origin": {
        "origin": "0f3c6a0e-6f0e-4f7e-9a57-7d1d2b8e9c11",
        "kinds": [{"name": "Job.v1.batch", "resource": "jobs"}, JOBSET,
                  {"name": "Job.v1.batch"}],
        "createNamespaces": False,
        "tokenSecret": {"create": False},
        "namespaceOverride": "ops",
        "namespaces": ["team-a", "team-b"],
    },
    # An origin that cannot be part of a name (hashed), generic kinds with conventional
    # plurals (one in the core group), the account named, no admission policy.
    "generic-kinds": {
        "origin": "Manager_A.example",
        "kinds": [{"name": "Batch.v1.example.com"}, {"name": "Policy.v1beta1.example.com"},
                  {"name": "Day.v1.example.com"}, {"name": "Box.v1"}],
        "serviceAccount": {"name": "relay"},
        "admissionPolicy": {"enabled": False},
    },
    "long-origin": {"origin": "m" * 41, "commonLabels": {"team": "platform"}},
}  # fmt: skip


def _id(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_helm_lint(major: int, name: str) -> None:
    found = tools()
    path = values_file(VALUE_SETS[name])
    try:
        helm("lint", "--strict", str(WORKER_CHART), "-f", str(path),
             binary=found.helm if major == 3 else found.helm4)  # fmt: skip
    finally:
        path.unlink()


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_the_chart_fills_in_its_objects_as_clusters_add_does(name: str) -> None:
    """The objects are written once (files/worker-access.yaml); what is filled in (the
    account's name, each kind's rules, the origin) is computed by the chart's helpers and by
    manifests/worker_access.py, which must agree."""
    values = VALUE_SETS[name]
    rendered = render(WORKER_CHART, values, namespace="jobrelay-system")
    inputs = Inputs.of(values, "jobrelay-system")
    expected = inputs.generated(
        policy=values.get("admissionPolicy", {}).get("enabled", True),
        token=values.get("tokenSecret", {}).get("create", True),
    )
    namespaces = [obj for obj in rendered if obj["kind"] == "Namespace"]
    bindings = [obj for obj in rendered if obj["kind"] == "RoleBinding"]
    ours = {_id(obj): obj for obj in rendered if obj["kind"] not in ("Namespace", "RoleBinding")}
    assert sorted(ours) == sorted(_id(obj) for obj in expected)
    for obj in expected:
        chart_obj = ours[_id(obj)]
        extra = set(chart_obj["metadata"]["labels"]) - set(obj["metadata"].get("labels") or {})
        assert extra == RELEASE_LABELS | set(values.get("commonLabels") or {}), _id(obj)
        chart_obj = without_release_labels(chart_obj)
        for key in values.get("commonLabels") or {}:
            chart_obj["metadata"]["labels"].pop(key)
        assert chart_obj == obj, _id(obj)
    # The namespaces opened: labelled with the origin, kept on uninstall.
    assert [ns["metadata"]["name"] for ns in namespaces] == values.get("namespaces", [])
    for ns in namespaces:
        assert ns["metadata"]["labels"][ORIGIN_LABEL] == values["origin"]
        assert ns["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    # Each bound to the namespaced ClusterRole, as the relay binds a namespace it opens.
    assert [b["metadata"]["namespace"] for b in bindings] == values.get("namespaces", [])
    for binding in bindings:
        made = worker_access.namespace_binding(
            inputs.account.name, inputs.account.namespace, inputs.origin,
            binding["metadata"]["namespace"],
        )  # fmt: skip
        chart_binding = without_release_labels(binding)
        for key in values.get("commonLabels") or {}:
            chart_binding["metadata"]["labels"].pop(key)
        assert chart_binding == made


def test_each_kind_gets_its_rules_once_and_namespaces_are_created_only_when_allowed() -> None:
    for values, create in ((VALUE_SETS["defaults"], ["create"]), (VALUE_SETS["uid-origin"], [])):
        rendered = {_id(obj): obj for obj in render(WORKER_CHART, values)}
        name = serviceaccount.account_name(values["origin"])
        rules = [(rule["apiGroups"], rule["resources"], rule["verbs"])
                 for rule in rendered["ClusterRole", name]["rules"]]  # fmt: skip
        kinds = [("batch", "jobs")] + [("jobset.x-k8s.io", "jobsets")] * ("kinds" in values)
        mirrors = [
            rule
            for group, plural in kinds
            for rule in (([group], [plural], ["get", "list", "watch", "create", "patch", "delete"]),
                         ([group], [f"{plural}/status"], ["get"]))
        ]  # fmt: skip
        assert rules[: len(mirrors)] == mirrors
        assert ([""], ["namespaces"], ["get", "list", "watch", *create]) in rules
        policy = rendered["ValidatingAdmissionPolicy", name]
        matched = [r["resources"] for r in policy["spec"]["matchConstraints"]["resourceRules"]]
        assert matched[: len(kinds)] == [[plural, f"{plural}/status"] for _, plural in kinds]
        assert all(values["origin"] in v["message"] for v in policy["spec"]["validations"][2:])


@settings(max_examples=25)
@given(st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", fullmatch=True))
def test_the_account_is_named_as_the_cli_names_it(origin: str) -> None:
    [account] = render(WORKER_CHART, {"origin": origin},
                       show_only=["templates/serviceaccount.yaml"])[:1]  # fmt: skip
    assert account["metadata"]["name"] == serviceaccount.account_name(origin)


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        ({}, "origin is required"),
        ({"origin": "not a label value"}, "/origin"),
        ({"origin": "a", "kinds": []}, "/kinds"),
        ({"origin": "a", "kinds": [{"name": "job"}]}, "/kinds/0/name"),
        ({"origin": "a", "namespaces": ["kube-system"]}, "cannot be opened"),
        ({"origin": "a", "namespaces": ["jobrelay-system"]}, "cannot be opened"),
        ({"origin": "a", "kind": []}, "additional properties"),  # a misspelt key
    ],
)  # fmt: skip
def test_wrong_values_are_refused_with_what_is_wrong(values: dict[str, Any], refusal: str) -> None:
    path = values_file(values)
    try:
        done = helm("template", "w", str(WORKER_CHART), "-n", "jobrelay-system", "-f", str(path),
                    check=False)  # fmt: skip
    finally:
        path.unlink()
    assert done.returncode != 0
    assert refusal in done.stderr, done.stderr


@pytest.fixture
async def worker(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("worker-1"), cluster="worker-1") as made:
        yield made


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
async def test_every_rendered_object_passes_a_server_side_dry_run(
    name: str, worker: ApiClient
) -> None:
    """The v1.35 apiserver validates each object (schemas, RBAC escalation, CEL); only the
    account's namespace and the namespaces opened are made for real (a dry run of a
    namespaced object, such as an opened namespace's RoleBinding, needs its namespace)."""
    values = {
        **VALUE_SETS[name],
        "origin": f"{VALUE_SETS[name]['origin'][:50]}-{uuid.uuid4().hex[:6]}",
    }
    values.pop("namespaceOverride", None)
    values["namespaces"] = [f"{ns}-{uuid.uuid4().hex[:6]}" for ns in values.get("namespaces", [])]
    release_namespace = f"worker-chart-{uuid.uuid4().hex[:6]}"
    await worker.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": release_namespace}})  # fmt: skip
    try:
        rendered = render(WORKER_CHART, values, namespace=release_namespace)
        assert rendered
        for obj in rendered:
            opened = obj["kind"] == "Namespace"
            stored = await worker.create(RESOURCES[obj["kind"]], obj, dry_run=not opened)
            # (A policy's CEL expressions are compiled by this create: one that does not
            # compile is a 422 here.)
            assert stored["metadata"]["name"] == obj["metadata"]["name"]
    finally:
        for made in [release_namespace, *values["namespaces"]]:
            with contextlib.suppress(ApiError):
                await worker.delete(NAMESPACES, made)
