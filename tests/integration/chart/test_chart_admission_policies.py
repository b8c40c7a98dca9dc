"""The chart's ValidatingAdmissionPolicies are its files/admission-policies.yaml filled in
for its values: each kind's rule (with /status), the "delegated to jobrelay" condition and
the controller's identity, plus the chart's labels. `jobrelay manifests admission-policy`
fills the same file in; both are checked against the same expectations below (what each
fills in is computed twice, by the chart's helpers and by manifests/admission_policy.py;
the objects are written once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from jobrelay.manifests.admission_policy import (
    admission_policy_documents,
    kind_claims,
    policy_kinds,
)
from jobrelay.manifests.chart_sources import fill
from tests.chart_render import CHART, by_kind_and_name, chart_tools, render

# helm only, no fleet: an integration test because it needs the helm build.
pytestmark = pytest.mark.integration

DATA = yaml.safe_load((CHART / "files" / "admission-policies.yaml").read_text())
OBJECTS = (
    "placementPolicy", "placementBinding", "podsPolicy", "podsBinding", "sizePolicy",
    "sizeBinding",
)  # fmt: skip
RELAY = "object.?spec.?managedBy.orValue('') == 'jobrelay.dev/relay'"


@dataclass(frozen=True)
class Case:
    """Chart values, the `manifests admission-policy` flags that mean the same, and what
    both fill in."""

    release: str
    namespace: str
    values: dict[str, Any]
    controller: str  # the ServiceAccount, namespace:name
    kinds: tuple[str, ...]  # --kind
    rules: tuple[tuple[str, str], ...]  # (group, plural) per kind
    delegated: str
    controller_name: str = "jobrelay.dev/relay"
    fields: tuple[str, ...] = ()  # --managed-by-field


CASES = {
    "defaults": Case("jobrelay", "jobrelay-system", {}, "jobrelay-system:jobrelay",
                     ("Job.v1.batch",), (("batch", "jobs"),), RELAY),
    "three-kinds": Case(
        "relay", "batch-control",
        {"serviceAccount": {"name": "dispatcher"},
         "kinds": [{"name": "Job.v1.batch"}, {"name": "JobSet.v1alpha2.jobset.x-k8s.io"},
                   {"name": "Widget.v1.example.com"}]},
        "batch-control:dispatcher",
        ("Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io", "Widget.v1.example.com"),
        (("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("example.com", "widgets")),
        RELAY,
    ),
    "own-controller-name": Case(
        "team", "team-a",
        {"fullnameOverride": "relay-a", "controllerName": "example.com/team-a",
         "kinds": [{"name": "Sleeper.v1.sleep.example.com", "resource": "sleepers"}]},
        "team-a:relay-a", ("Sleeper.v1.sleep.example.com",), (("sleep.example.com", "sleepers"),),
        "object.?spec.?managedBy.orValue('') == 'example.com/team-a'",
        controller_name="example.com/team-a",
    ),
    "existing-service-account": Case(
        "custom", "jobs", {"serviceAccount": {"create": False, "name": "existing-sa"}},
        "jobs:existing-sa", ("Job.v1.batch",), (("batch", "jobs"),), RELAY,
    ),
    # A kind claiming another managedBy value, or keeping it at spec.runPolicy.managedBy
    # (known for PyTorchJob, set for a kind without an adapter): a clause per kind.
    "claims": Case(
        "jobrelay", "jobrelay-system",
        {"kinds": [{"name": "Job.v1.batch"},
                   {"name": "RayJob.v1.ray.io", "managedBy": "kueue.x-k8s.io/multikueue"},
                   {"name": "PyTorchJob.v1.kubeflow.org"},
                   {"name": "Widget.v1.example.com",
                    "managedByField": "spec.runPolicy.managedBy"}]},
        "jobrelay-system:jobrelay",
        ("Job.v1.batch", "RayJob.v1.ray.io=kueue.x-k8s.io/multikueue",
         "PyTorchJob.v1.kubeflow.org", "Widget.v1.example.com"),
        (("batch", "jobs"), ("ray.io", "rayjobs"), ("kubeflow.org", "pytorchjobs"),
         ("example.com", "widgets")),
        " || ".join([
            "(request.resource.group == 'batch' && request.resource.resource == 'jobs'"
            " && object.?spec.?managedBy.orValue('') == 'jobrelay.dev/relay')",
            "(request.resource.group == 'ray.io' && request.resource.resource == 'rayjobs'"
            " && object.?spec.?managedBy.orValue('') == 'kueue.x-k8s.io/multikueue')",
            "(request.resource.group == 'kubeflow.org'"
            " && request.resource.resource == 'pytorchjobs'"
            " && object.?spec.?runPolicy.?managedBy.orValue('') == 'jobrelay.dev/relay')",
            "(request.resource.group == 'example.com' && request.resource.resource == 'widgets'"
            " && object.?spec.?runPolicy.?managedBy.orValue('') == 'jobrelay.dev/relay')",
        ]),
        fields=("Widget.v1.example.com=spec.runPolicy.managedBy",),
    ),
}  # fmt: skip


def expected(case: Case) -> dict[tuple[str, str], dict[str, Any]]:
    """The data file's objects filled in with what ``case`` expects."""
    values = {
        "controller": f"'system:serviceaccount:{case.controller}'",
        "delegated": case.delegated,
    }
    objects = [fill(DATA[key], values) for key in OBJECTS]
    rules = [
        {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
         "resources": [plural, f"{plural}/status"]}
        for group, plural in case.rules
    ]  # fmt: skip
    for policy in (objects[0], objects[OBJECTS.index("sizePolicy")]):
        policy["spec"]["matchConstraints"]["resourceRules"] = rules
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in objects}


def _without_labels(document: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in document["metadata"].items() if k != "labels"}
    return {**document, "metadata": metadata}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_chart_fills_in_its_policies_for_its_values(name: str) -> None:
    case = CASES[name]
    rendered = render(chart_tools().helm, case.values, release=case.release,
                      namespace=case.namespace)  # fmt: skip
    policies = {
        key: doc
        for key, doc in by_kind_and_name(rendered).items()
        if key[0].startswith("ValidatingAdmissionPolicy")
    }
    want = expected(case)
    assert policies.keys() == want.keys()
    for key, document in policies.items():
        assert document["metadata"]["labels"]["app.kubernetes.io/part-of"] == "jobrelay", key
        assert _without_labels(document) == want[key], key


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_fills_in_the_same_policies_for_the_same_kinds_and_identity(name: str) -> None:
    case = CASES[name]
    namespace, service_account = case.controller.split(":")
    generated = admission_policy_documents(
        policy_kinds(case.kinds),
        controller_namespace=namespace,
        controller_service_account=service_account,
        controller_name=case.controller_name,
        claims=kind_claims(case.kinds, case.fields),
    )
    assert {(doc["kind"], doc["metadata"]["name"]): doc for doc in generated} == expected(case)


def test_the_policies_can_be_left_out() -> None:
    rendered = render(chart_tools().helm, {"admissionPolicies": {"enabled": False}})
    assert not [d for d in rendered if d["kind"].startswith("ValidatingAdmissionPolicy")]
