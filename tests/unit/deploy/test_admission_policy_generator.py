"""`jobrelay manifests admission-policy` fills the chart's files/admission-policies.yaml in
for every kind it is given, with its /status subresource, and the controller it is told
(the chart's template fills the same file in: tests/integration/chart/
test_chart_admission_policies.py checks both against the same expectations)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jobrelay.cli.main import cli
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.manifests.admission_policy import (
    PLACEMENT_POLICY,
    PODS_POLICY,
    admission_policy_documents,
    admission_policy_yaml,
    policy_kinds,
)
from jobrelay.vocabulary.names import PLACEMENT_KEYS

DEPLOYED_CONTROLLER = "system:serviceaccount:jobrelay-system:jobrelay"


def by_name(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def rules(documents: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    policy = by_name(documents, "ValidatingAdmissionPolicy", PLACEMENT_POLICY)
    return [
        (rule["apiGroups"][0], tuple(rule["resources"]))
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
    ]


def test_the_defaults_cover_jobs_and_jobsets_with_their_status_subresources() -> None:
    assert rules(list(yaml.safe_load_all(admission_policy_yaml()))) == [
        ("batch", ("jobs", "jobs/status")),
        ("jobset.x-k8s.io", ("jobsets", "jobsets/status")),
    ]
    assert DEPLOYED_CONTROLLER in admission_policy_yaml()


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["Job.v1.batch"], [("batch", ("jobs", "jobs/status"))]),
        (
            ["Job.v1.batch", "TrainJob.v1alpha1.trainer.kubeflow.org", "Job.v1.batch"],
            [
                ("batch", ("jobs", "jobs/status")),
                ("trainer.kubeflow.org", ("trainjobs", "trainjobs/status")),
            ],
        ),
        (
            [JobSetKind.ref.name, "RayJob.v1.ray.io", "Batch.v1.example.com", "Policy.v1.x.io"],
            [
                ("jobset.x-k8s.io", ("jobsets", "jobsets/status")),
                ("ray.io", ("rayjobs", "rayjobs/status")),
                ("example.com", ("batches", "batches/status")),
                ("x.io", ("policies", "policies/status")),
            ],
        ),
    ],
)
def test_every_kind_given_is_matched_with_its_status(
    names: list[str], expected: list[tuple[str, tuple[str, ...]]]
) -> None:
    assert rules(admission_policy_documents(policy_kinds(names))) == expected
    text = admission_policy_yaml(names)
    assert rules(list(yaml.safe_load_all(text))) == expected
    assert "jobrelay manifests admission-policy " + " ".join(f"--kind {n}" for n in names) in text


def test_every_placement_key_is_protected() -> None:
    policy = by_name(
        admission_policy_documents(policy_kinds()), "ValidatingAdmissionPolicy", PLACEMENT_POLICY
    )
    (keys,) = [v for v in policy["spec"]["variables"] if v["name"] == "placementKeys"]
    assert keys["expression"] == "[" + ", ".join(f"'{key}'" for key in PLACEMENT_KEYS) + "]"


def test_the_controller_is_a_parameter_of_both_policies() -> None:
    documents = admission_policy_documents(
        policy_kinds(), controller_namespace="ops", controller_service_account="relay",
        controller_name="example.com/it's",
    )  # fmt: skip
    placement = by_name(documents, "ValidatingAdmissionPolicy", PLACEMENT_POLICY)
    pods = by_name(documents, "ValidatingAdmissionPolicy", PODS_POLICY)
    user = "'system:serviceaccount:ops:relay'"
    assert [c["expression"] for c in placement["spec"]["matchConditions"]] == [
        "object.?spec.?managedBy.orValue('') == 'example.com/it\\'s'",
        f"request.userInfo.username != {user}",
    ]
    assert [c["expression"] for c in pods["spec"]["matchConditions"]] == [
        f"request.userInfo.username == {user}"
    ]
    assert DEPLOYED_CONTROLLER not in yaml.safe_dump_all(documents)
    for name in (PLACEMENT_POLICY, PODS_POLICY):
        binding = by_name(documents, "ValidatingAdmissionPolicyBinding", name)
        assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}


def test_the_cli_prints_the_generators_output() -> None:
    runner = CliRunner()
    done = runner.invoke(cli, ["manifests", "admission-policy"])
    assert done.exit_code == 0, done.output
    assert done.output == admission_policy_yaml()
    args = ["manifests", "admission-policy", "--kind", "RayJob.v1.ray.io",
            "--controller-namespace", "ops"]  # fmt: skip
    done = runner.invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert done.output == admission_policy_yaml(["RayJob.v1.ray.io"], controller_namespace="ops")
    for bad, says in (
        (["--kind", "rayjob"], "write Kind.version.group"),
        (["--controller-namespace", "Ops"], "is not a namespace name"),
        (["--controller-namespace", "ops\n"], "is not a namespace name"),
        (["--controller-service-account", "relay\n"], "is not a ServiceAccount name"),
        (["--controller-service-account", "a b"], "is not a ServiceAccount name"),
        (["--controller-name", "x\ny"], "a spec.managedBy value"),
    ):
        done = runner.invoke(cli, ["manifests", "admission-policy", *bad])
        assert done.exit_code == 2 and says in done.output, done.output
        assert "Traceback" not in done.output
