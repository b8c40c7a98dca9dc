"""The least-privilege worker identity: its rules, the objects applied on the worker, the
token read back and the kubeconfig built. (charts/jobrelay-worker renders the same objects:
tests/integration/chart/test_worker_chart.py compares them.)"""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.fleet import serviceaccount
from jobrelay.fleet.serviceaccount import WorkerAccount, worker_rules
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kinds.kubeflow import MPIJobKind
from jobrelay.kinds.ray import RayJobKind
from jobrelay.kinds.trainjob import TrainJobKind
from jobrelay.manifests import worker_access
from jobrelay.vocabulary.resource import Resource

JOB = JobKind.ref
JOBSET = JobSetKind.ref
RAYJOB = RayJobKind.ref
MPIJOB = MPIJobKind.ref


BASE = {
    "/events", "/nodes", "/pods", "/persistentvolumeclaims", "/namespaces",
    "autoscaling.x-k8s.io/provisioningrequests", "/podtemplates",
}  # fmt: skip


@pytest.mark.parametrize(
    ("kinds", "create_namespaces", "resources"),
    [
        ([JOB], True, {"batch/jobs", "batch/jobs/status", *BASE}),
        ([JOB], False, {"batch/jobs", "batch/jobs/status", *BASE}),
        (
            [JOB, JOBSET, JOB],
            False,
            {"batch/jobs", "batch/jobs/status", "jobset.x-k8s.io/jobsets",
             "jobset.x-k8s.io/jobsets/status", *BASE},
        ),
        # Owner hops: a RayJob's RayCluster and submitter Job, an MPIJob's launcher Job.
        (
            [RAYJOB, MPIJOB],
            False,
            {"ray.io/rayjobs", "ray.io/rayjobs/status", "kubeflow.org/mpijobs",
             "kubeflow.org/mpijobs/status", "ray.io/rayclusters", "batch/jobs", *BASE},
        ),
    ],
)  # fmt: skip
def test_rules_by_kind_and_namespace_creation(
    kinds: list[Resource], create_namespaces: bool, resources: set[str]
) -> None:
    rules = worker_rules(kinds, create_namespaces=create_namespaces)
    named = [f"{rule['apiGroups'][0]}/{rule['resources'][0]}" for rule in rules]
    assert len(named) == len(set(named)) and set(named) == resources


def test_the_shipped_owner_hops_are_the_kinds_own() -> None:
    """files/worker-access.yaml `ownerHops` (the chart reads it too) says what each kind's
    adapter names: a kind with hops the worker credential could not list counts fewer pods."""
    catalog = [RayJobKind(), MPIJobKind(), JobKind(), JobSetKind(), TrainJobKind()]
    table = worker_access.owner_hops([kind.ref for kind in catalog])
    for kind in catalog:
        shipped = table.get(f"{kind.ref.kind}.{kind.ref.group}", [])
        assert [(h["group"], h["plural"]) for h in shipped] == [
            (ref.group, ref.plural) for ref in kind.owner_hop_refs
        ], kind.ref.kind


def _objects(*, policy: bool) -> dict[tuple[str, str], dict[str, Any]]:
    account = WorkerAccount("jobrelay-system", "jobrelay-worker-m")
    made = serviceaccount.admission_policy(account, "m", [JOB]) if policy else None
    rules = worker_rules([JOB], create_namespaces=True)
    return {
        (manifest["kind"], manifest["metadata"]["name"]): manifest
        for _, manifest in serviceaccount.manifests(account, rules, made)
    }


@given(st.lists(st.sampled_from([JOB, JOBSET, RAYJOB, MPIJOB]), max_size=4), st.booleans())
def test_no_cluster_wide_rule_reads_secrets_or_grants_more_than_the_controller_does(
    kinds: list[Resource], create_namespaces: bool
) -> None:
    """Never a wildcard, pods only counted, never a ConfigMap, Secret or ServiceAccount
    cluster-wide, never a write to what is not a mirror, never escalate nor impersonate."""
    for rule in worker_rules(kinds, create_namespaces=create_namespaces):
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert not {"pods/exec", "pods/log", "serviceaccounts/token"} & set(rule["resources"])
        assert not {"secrets", "configmaps", "serviceaccounts"} & set(rule["resources"])
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
        if rule["resources"][0] in ("nodes", "pods", "persistentvolumeclaims"):
            # Capacity and data: never a write, never a get.
            assert rule["verbs"] == ["list", "watch"]
        elif rule["resources"][0] in ("namespaces",):
            # Read (which are open to this manager); created only when it creates them.
            assert rule["verbs"] == ["get", "list", "watch", *(["create"] * create_namespaces)]
        elif rule["resources"][0].endswith("/status") or rule["resources"][0] == "events":
            assert set(rule["verbs"]) <= {"get", "list", "watch"}


def test_the_account_binds_only_its_namespaced_role_and_only_with_the_policy() -> None:
    """bind with resourceNames (never escalate); Secrets only in the namespaced ClusterRole,
    which no ClusterRoleBinding grants; without the admission policy, no bind at all."""
    made = _objects(policy=True)
    cluster_rules = made["ClusterRole", "jobrelay-worker-m"]["rules"]
    rbac = [r for r in cluster_rules if r["apiGroups"] == ["rbac.authorization.k8s.io"]]
    assert rbac == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"],
         "verbs": ["create"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
         "resourceNames": ["jobrelay-worker-m-namespaced"], "verbs": ["bind"]},
    ]  # fmt: skip
    namespaced = made["ClusterRole", "jobrelay-worker-m-namespaced"]["rules"]
    assert {"secrets", "pods/log"} <= {r for rule in namespaced for r in rule["resources"]}
    assert all("escalate" not in rule["verbs"] for rule in namespaced + cluster_rules)
    bound = [m for m in made.values() if m["kind"] == "ClusterRoleBinding"]
    assert [m["roleRef"]["name"] for m in bound] == ["jobrelay-worker-m"]
    without = _objects(policy=False)["ClusterRole", "jobrelay-worker-m"]["rules"]
    assert all(r["apiGroups"] != ["rbac.authorization.k8s.io"] for r in without)


def test_the_namespace_binding_grants_the_namespaced_role_to_the_account_alone() -> None:
    binding = worker_access.namespace_binding("jobrelay-worker-m", "ops", "m", "team-a")
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["metadata"]["labels"]["jobrelay.dev/origin"] == "m"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
        "name": "jobrelay-worker-m-namespaced",
    }  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "jobrelay-worker-m", "namespace": "ops"}
    ]


def token_secret(token: bytes | None, account: str = "jobrelay-worker") -> dict[str, Any]:
    secret: dict[str, Any] = {
        "metadata": {"annotations": {"kubernetes.io/service-account.name": account}},
        "data": {},
    }
    if token is not None:
        secret["data"]["token"] = base64.b64encode(token).decode()
    return secret


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        (token_secret(b"abc.def"), "abc.def"),
        (token_secret(None), None),  # the token controller has not filled it yet
        (token_secret(b"abc", account="someone-else"), None),
        ({"metadata": {}, "data": {"token": "!!notbase64"}}, None),
        ({}, None),
    ],
)
def test_secret_token(secret: dict[str, Any], expected: str | None) -> None:
    assert serviceaccount.secret_token(secret, WorkerAccount()) == expected


def test_the_kubeconfig_keeps_the_admins_server_and_ca_and_nothing_of_the_admins_user() -> None:
    admin_cluster = {
        "server": "https://10.0.0.1:6443",
        "certificate-authority-data": "Q0E=",
        "tls-server-name": "api.example",
        "proxy-url": "http://proxy:3128",
        "insecure-skip-tls-verify": True,
        "extensions": [{"name": "x", "extension": {}}],
    }
    config = serviceaccount.worker_kubeconfig("w1", admin_cluster, "tok", WorkerAccount())
    assert config["clusters"] == [
        {"name": "w1", "cluster": {"server": "https://10.0.0.1:6443",
                                   "certificate-authority-data": "Q0E=",
                                   "tls-server-name": "api.example"}}
    ]  # fmt: skip
    assert config["users"] == [{"name": "jobrelay-worker@w1", "user": {"token": "tok"}}]
    assert config["current-context"] == "w1"


def test_a_kubeconfig_without_a_server_is_refused() -> None:
    with pytest.raises(serviceaccount.RegistryError, match="no server"):
        serviceaccount.worker_kubeconfig("w1", {}, "tok", WorkerAccount())


def test_account_names() -> None:
    account = WorkerAccount("ops", "relay")
    assert account.username == "system:serviceaccount:ops:relay"
    assert account.token_secret == "relay-token"


@pytest.mark.parametrize(
    ("origin", "name"),
    [
        ("manager-a", "jobrelay-worker-manager-a"),
        (
            "0f3c6a0e-6f0e-4f7e-9a57-7d1d2b8e9c11",
            "jobrelay-worker-0f3c6a0e-6f0e-4f7e-9a57-7d1d2b8e9c11",
        ),
    ],
)
def test_the_account_name_carries_the_origin(origin: str, name: str) -> None:
    assert serviceaccount.account_name(origin) == name


@given(st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", fullmatch=True))
def test_every_origin_gives_a_valid_distinct_account_name(origin: str) -> None:
    name = serviceaccount.account_name(origin)
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 57, name
    other = origin + "x" if len(origin) < 63 else origin[:-1]
    assert serviceaccount.account_name(other) != name


def test_the_policy_binds_to_the_account_and_names_the_origin_and_every_kind() -> None:
    account = WorkerAccount("ops", serviceaccount.account_name("manager-a"))
    [(_, policy), (_, binding)] = serviceaccount.admission_policy(
        account, "manager-a", [JOB, JOBSET]
    )
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == account.name
    [condition] = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        'request.userInfo.username == "system:serviceaccount:ops:jobrelay-worker-manager-a"'
    )
    resources = {r for rule in policy["spec"]["matchConstraints"]["resourceRules"]
                 for r in rule["resources"]}  # fmt: skip
    assert resources == {"jobs", "jobs/status", "jobsets", "jobsets/status", "namespaces",
                         "configmaps", "secrets", "serviceaccounts", "rolebindings"}  # fmt: skip
    # Each names the origin, or (the RoleBinding's) the one ClusterRole it may bind.
    assert all(
        '"manager-a"' in v["expression"]
        or '"jobrelay-worker-manager-a-namespaced"' in v["expression"]
        for v in policy["spec"]["validations"][2:]
    )
    assert '"ops"' in policy["spec"]["validations"][1]["expression"]
