"""The chart's RBAC on the manager grants every request the controller makes there, and
nothing cluster-wide that a resourceNames or a namespace could narrow: for several kind
lists, namespaces, ServiceAccounts and controller names (the rules follow the values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from jobrelay.fleet import workerclusters
from jobrelay.manifests.admission_policy import policy_kinds
from jobrelay.vocabulary.leases import lease_name_for
from tests.chart_render import chart_tools, render

# helm only, no fleet: an integration test because it needs the helm build.
pytestmark = pytest.mark.integration

ANY = None  # any namespace, or a name not known in advance
AUTHENTICATION = "extension-apiserver-authentication"
CRD = workerclusters.crd_manifest()["metadata"]["name"]


@dataclass(frozen=True)
class Request:
    group: str
    resource: str
    verb: str
    namespace: str | None = ANY  # None: cluster-wide (a list across namespaces) or any
    name: str | None = ANY


@dataclass(frozen=True)
class Install:
    """One rendering of the chart: its values and the identity they give the controller."""

    release: str
    namespace: str
    values: dict[str, Any]
    service_account: str
    kinds: tuple[str, ...]
    controller_name: str = "jobrelay.dev/relay"


INSTALLS = [
    Install("jobrelay", "jobrelay-system", {}, "jobrelay", ("Job.v1.batch",)),
    Install(
        "relay",
        "batch-control",
        {
            "serviceAccount": {"name": "dispatcher"},
            "controllerName": "example.com/Batch_Relay",
            "kinds": [
                {"name": "Job.v1.batch"},
                {"name": "JobSet.v1alpha2.jobset.x-k8s.io"},
                {
                    "name": "RayJob.v1.ray.io",
                    "resource": "rayjobs",
                    "managedBy": "kueue.x-k8s.io/multikueue",
                },
            ],
        },
        "dispatcher",
        ("Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io", "RayJob.v1.ray.io"),
        "example.com/Batch_Relay",
    ),
    Install(
        "other",
        "ops",
        {
            "fullnameOverride": "jr",
            "kinds": [{"name": "JobSet.v1alpha2.jobset.x-k8s.io"}],
            "dependencies": {"secretNamespaces": ["team-a", "team-b"]},
        },
        "jr",
        ("JobSet.v1alpha2.jobset.x-k8s.io",),
    ),
]


def needed(install: Install) -> list[Request]:
    """Every request the controller of this install makes on the management cluster."""
    namespace, lease = install.namespace, lease_name_for(install.controller_name)
    fullname = install.values.get("fullnameOverride") or (
        install.release if "jobrelay" in install.release else f"{install.release}-jobrelay"
    )
    requests = []
    for kind in policy_kinds(install.kinds):
        group, plural = kind.group, kind.plural
        requests += [Request(group, plural, verb) for verb in ("get", "list", "watch", "patch")]
        requests.append(Request(group, f"{plural}/status", "patch"))
    return [
        *requests,
        Request("", "events", "create"),
        Request("", "events", "patch"),
        Request("jobrelay.dev", "workerclusters", "get"),
        Request("jobrelay.dev", "workerclusters", "list"),
        Request("jobrelay.dev", "workerclusters", "watch"),
        Request("jobrelay.dev", "workerclusters/status", "patch"),
        Request("jobrelay.dev", "relayqueues", "get"),
        Request("jobrelay.dev", "relayqueues", "list"),
        Request("jobrelay.dev", "relayqueues", "watch"),
        Request("jobrelay.dev", "relayqueues/status", "patch"),
        Request("jobrelay.dev", "relayqueues/status", "update"),
        # The chart installs the CRD; the controller only reads it (no create or patch:
        # those belong to `jobrelay run --install-crds`, for the local fleet).
        Request("apiextensions.k8s.io", "customresourcedefinitions", "get", name=CRD),
        Request("", "namespaces", "get"),
        Request("", "namespaces", "list"),
        Request("", "namespaces", "watch"),
        Request("", "pods", "create"),  # dry runs only (the jobrelay-pods-dry-run-only policy)
        Request("", "secrets", "get", namespace=namespace),
        Request("", "secrets", "list", namespace=namespace),
        Request("", "secrets", "watch", namespace=namespace),
        Request("coordination.k8s.io", "leases", "get", namespace=namespace, name=lease),
        Request("coordination.k8s.io", "leases", "update", namespace=namespace, name=lease),
        Request("coordination.k8s.io", "leases", "create", namespace=namespace),
        # The origin record: read on every start, made on the first, replaced when the
        # `origin` value names another origin.
        Request("", "configmaps", "get", namespace=namespace, name=f"{lease}-origin"),
        Request("", "configmaps", "patch", namespace=namespace, name=f"{lease}-origin"),
        Request("", "configmaps", "create", namespace=namespace),
        # The aggregated API: a review of each forwarded user, and the front proxy it
        # trusts, followed by a list+watch of that one ConfigMap (by a field selector).
        Request("authorization.k8s.io", "subjectaccessreviews", "create"),
        *(
            Request("", "configmaps", verb, namespace="kube-system", name=AUTHENTICATION)
            for verb in ("list", "watch")
        ),
        # Dependencies follow the workload: what its templates name, in any namespace, but
        # Secrets: only in the namespaces opened to Secret copying.
        *(
            Request("", resource, verb)
            for resource in ("configmaps", "serviceaccounts")
            for verb in ("get", "list", "watch")
        ),
        *(
            Request("", "secrets", verb, namespace=opened)
            for opened in install.values.get("dependencies", {}).get("secretNamespaces", [])
            for verb in ("get", "list", "watch")
        ),
        # The selfSigned API certificate (the default): its Secret made and renewed, its
        # CA written into the chart's APIService and webhook configuration.
        Request("", "secrets", "create", namespace=namespace),
        Request("", "secrets", "update", namespace=namespace, name=f"{fullname}-api-tls"),
        *(
            Request(group, resource, verb, name=name)
            for group, resource, name in (
                ("apiregistration.k8s.io", "apiservices", "v1alpha1.api.jobrelay.dev"),
                (
                    "admissionregistration.k8s.io",
                    "mutatingwebhookconfigurations",
                    f"{fullname}-managedby",
                ),
            )
            for verb in ("get", "patch")
        ),
        # Fleet-wide queues: priorities and the manager's ResourceQuotas, read.
        *(
            Request(group, resource, verb)
            for group, resource in (
                ("scheduling.k8s.io", "priorityclasses"),
                ("", "resourcequotas"),
            )
            for verb in ("get", "list", "watch")
        ),
    ]


# Kubernetes' own roles for aggregated apiservers, which the chart binds (their rules as
# the apiserver bootstraps them).
BUILT_IN = {
    ("ClusterRole", "system:auth-delegator"): [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
         "verbs": ["create"]},
    ],
    ("Role", "extension-apiserver-authentication-reader"): [
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["extension-apiserver-authentication"],
         "verbs": ["get", "list", "watch"]},
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Grant:
    rule: dict[str, Any]
    namespace: str | None  # None: a ClusterRole bound cluster-wide
    built_in: bool = False  # of a role Kubernetes makes (not shaped by the chart)

    def allows(self, request: Request) -> bool:
        rule = self.rule
        if self.namespace is not None and request.namespace != self.namespace:
            return False
        names = rule.get("resourceNames") or []
        return (
            request.group in rule["apiGroups"]
            and request.resource in rule["resources"]
            and request.verb in rule["verbs"]
            and (not names or request.name in names)
        )


def controller_grants(install: Install) -> list[Grant]:
    """The rules the rendered chart binds to the controller's ServiceAccount."""
    docs = render(
        chart_tools().helm, install.values, release=install.release, namespace=install.namespace
    )
    controller = ("ServiceAccount", install.service_account, install.namespace)
    accounts = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert [(d["metadata"]["name"], d["metadata"]["namespace"]) for d in accounts] == [
        controller[1:]
    ]
    # A Role by its namespace too: one of a name in each namespace opened to Secret copying.
    roles = {
        (doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")): doc
        for doc in docs
        if "rules" in doc
    }
    grants = []
    for doc in docs:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        bound = any(
            (s["kind"], s["name"], s.get("namespace", doc["metadata"].get("namespace")))
            == controller
            for s in doc["subjects"]
        )
        if not bound:
            continue
        ref = (doc["roleRef"]["kind"], doc["roleRef"]["name"])
        where = doc["metadata"]["namespace"] if doc["kind"] == "RoleBinding" else None
        if ref in BUILT_IN:
            grants += [Grant(rule, where, built_in=True) for rule in BUILT_IN[ref]]
            continue
        role = roles[(*ref, where if ref[0] == "Role" else None)]
        grants += [Grant(rule, where) for rule in role["rules"]]
    return grants


@pytest.mark.parametrize("install", INSTALLS, ids=lambda i: i.namespace)
def test_every_request_of_the_controller_is_granted(install: Install) -> None:
    grants = controller_grants(install)
    missing = [r for r in needed(install) if not any(grant.allows(r) for grant in grants)]
    assert not missing


@pytest.mark.parametrize("install", INSTALLS, ids=lambda i: i.namespace)
def test_nothing_is_granted_beyond_what_the_controller_needs(install: Install) -> None:
    """Each (group, resource, verb) granted is needed, and no wider than needed: a grant
    cluster-wide or by no name only where the request cannot name its namespace or object."""
    requests = needed(install)
    for grant in controller_grants(install):
        if grant.built_in:
            continue  # Kubernetes' standard roles of an aggregated apiserver
        rule = grant.rule
        assert "*" not in [*rule["apiGroups"], *rule["resources"], *rule["verbs"]]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    names = rule.get("resourceNames")
                    wanted = [
                        r
                        for r in requests
                        if (r.group, r.resource, r.verb) == (group, resource, verb)
                        and (not names or r.name in names)
                    ]
                    assert wanted, f"{verb} {group}/{resource} is granted but never used"
                    if grant.namespace is None:
                        # Some request needs it in any namespace (the dependencies read
                        # for copies cover the Role's namespaced ConfigMap reads too).
                        assert any(r.namespace is ANY for r in wanted), (
                            f"{verb} {group}/{resource}: cluster-wide, but one namespace would do"
                        )
                    if not names:
                        assert any(r.name is ANY for r in wanted), (
                            f"{verb} {group}/{resource}: not narrowed by resourceNames"
                        )


def test_no_cluster_wide_create_of_customresourcedefinitions() -> None:
    """The chart ships the CRDs (templates/crds.yaml): the controller may not create or
    change CRDs."""
    for install in INSTALLS:
        for grant in controller_grants(install):
            if "customresourcedefinitions" in grant.rule["resources"]:
                assert grant.rule["verbs"] == ["get"]
                assert grant.rule["resourceNames"] == [CRD]


@pytest.mark.parametrize("install", INSTALLS, ids=lambda i: i.namespace)
def test_the_aggregated_api_is_bound_as_kubernetes_asks(install: Install) -> None:
    """system:auth-delegator cluster-wide, the authentication reader in kube-system."""
    built_in = {(g.namespace, tuple(g.rule["resources"])) for g in controller_grants(install)
                if g.built_in}  # fmt: skip
    assert built_in == {
        (None, ("tokenreviews",)), (None, ("subjectaccessreviews",)),
        ("kube-system", ("configmaps",)),
    }  # fmt: skip


@pytest.mark.parametrize("install", INSTALLS, ids=lambda i: i.namespace)
def test_no_secret_is_read_cluster_wide(install: Install) -> None:
    """Issue 33: Secrets only in the controller's namespace (worker kubeconfigs) and the
    namespaces opened to Secret copying; the flag says the same namespaces."""
    opened = install.values.get("dependencies", {}).get("secretNamespaces", [])
    where = {
        grant.namespace
        for grant in controller_grants(install)
        if "secrets" in grant.rule["resources"]
    }
    assert where == {install.namespace, *opened}
    docs = render(
        chart_tools().helm, install.values, release=install.release, namespace=install.namespace
    )
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--dependency-secret-namespaces={','.join(opened)}" in args
