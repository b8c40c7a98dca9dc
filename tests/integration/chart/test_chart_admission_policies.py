"""The chart's ValidatingAdmissionPolicies are, object by object, what
``jobrelay manifests admission-policy`` generates for the same kinds, controller name
and controller identity (the chart only adds its labels)."""

from __future__ import annotations

from typing import Any

import pytest

from jobrelay.manifests.admission_policy import (
    admission_policy_documents,
    kind_claims,
    policy_kinds,
)
from tests.chart_render import by_kind_and_name, chart_tools, render

# helm only, no fleet: an integration test because it needs the helm build.
pytestmark = pytest.mark.integration

CASES = [
    # (release, namespace, values, service account, kinds, controller name)
    ("jobrelay", "jobrelay-system", {}, "jobrelay", ["Job.v1.batch"], "jobrelay.dev/relay"),
    (
        "relay", "batch-control",
        {
            "serviceAccount": {"name": "dispatcher"},
            "kinds": [
                {"name": "Job.v1.batch"},
                {"name": "JobSet.v1alpha2.jobset.x-k8s.io"},
                {"name": "RayJob.v1.ray.io"},
            ],
        },
        "dispatcher",
        ["Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io", "RayJob.v1.ray.io"],
        "jobrelay.dev/relay",
    ),
    (
        "team", "team-a",
        {
            "fullnameOverride": "relay-a",
            "controllerName": "example.com/team-a",
            "kinds": [{"name": "Sleeper.v1.sleep.example.com", "resource": "sleepers"}],
        },
        "relay-a", ["Sleeper.v1.sleep.example.com"], "example.com/team-a",
    ),
    (
        "custom", "jobs",
        {"serviceAccount": {"create": False, "name": "existing-sa"}},
        "existing-sa", ["Job.v1.batch"], "jobrelay.dev/relay",
    ),
]  # fmt: skip


def _without_labels(document: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in document["metadata"].items() if k != "labels"}
    return {**document, "metadata": metadata}


@pytest.mark.parametrize(
    ("release", "namespace", "values", "service_account", "kinds", "controller_name"),
    CASES,
    ids=[case[1] for case in CASES],
)
def test_the_charts_policies_are_the_generators(
    release: str,
    namespace: str,
    values: dict[str, Any],
    service_account: str,
    kinds: list[str],
    controller_name: str,
) -> None:
    rendered = render(chart_tools().helm, values, release=release, namespace=namespace)
    policies = {
        key: _without_labels(doc)
        for key, doc in by_kind_and_name(rendered).items()
        if key[0].startswith("ValidatingAdmissionPolicy")
    }
    generated = admission_policy_documents(
        policy_kinds(kinds),
        controller_namespace=namespace,
        controller_service_account=service_account,
        controller_name=controller_name,
    )
    expected = {(doc["kind"], doc["metadata"]["name"]): doc for doc in generated}
    assert policies.keys() == expected.keys()
    for key, document in expected.items():
        assert policies[key] == document, key


def test_the_policies_can_be_left_out() -> None:
    rendered = render(chart_tools().helm, {"admissionPolicies": {"enabled": False}})
    assert not [d for d in rendered if d["kind"].startswith("ValidatingAdmissionPolicy")]


def test_each_kinds_claimed_value_and_field_are_the_generators() -> None:
    """A kind claiming another managedBy value, or keeping it at spec.runPolicy.managedBy
    (known for PyTorchJob, set for a kind without an adapter), gets its own clause."""
    values = {
        "kinds": [
            {"name": "Job.v1.batch"},
            {"name": "RayJob.v1.ray.io", "managedBy": "kueue.x-k8s.io/multikueue"},
            {"name": "PyTorchJob.v1.kubeflow.org"},
            {"name": "Widget.v1.example.com", "managedByField": "spec.runPolicy.managedBy"},
        ]
    }
    flags = [
        "Job.v1.batch",
        "RayJob.v1.ray.io=kueue.x-k8s.io/multikueue",
        "PyTorchJob.v1.kubeflow.org",
        "Widget.v1.example.com",
    ]
    rendered = render(chart_tools().helm, values)
    policies = {
        key: _without_labels(doc)
        for key, doc in by_kind_and_name(rendered).items()
        if key[0].startswith("ValidatingAdmissionPolicy")
    }
    generated = admission_policy_documents(
        policy_kinds(flags),
        claims=kind_claims(flags, ["Widget.v1.example.com=spec.runPolicy.managedBy"]),
    )
    expected = {(doc["kind"], doc["metadata"]["name"]): doc for doc in generated}
    assert policies == expected
    condition = expected[("ValidatingAdmissionPolicy", "jobrelay-placement")]["spec"][
        "matchConditions"
    ][0]["expression"]
    assert "object.?spec.?runPolicy.?managedBy.orValue('') == 'jobrelay.dev/relay'" in condition
    assert "'kueue.x-k8s.io/multikueue'" in condition
