"""deploy/: the manager RBAC grants every request the controller makes there, and
nothing cluster-wide that a resourceNames or a namespace could narrow."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.controller.options import lease_name_for
from jobrelay.fleet import workerclusters
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.relayapi.rules import API_CONFIGMAP
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

DEPLOY = Path(__file__).parents[3] / "deploy"
CONTROLLER = ("ServiceAccount", "jobrelay", "jobrelay-system")
ANY = None  # any namespace, or a name not known in advance


@dataclass(frozen=True)
class Request:
    group: str
    resource: str
    verb: str
    namespace: str | None = ANY  # None: cluster-wide (a list across namespaces) or any
    name: str | None = ANY


def _kind_requests() -> list[Request]:
    requests = []
    for kind in DEDICATED.values():
        group, plural = kind.ref.group, kind.ref.plural
        requests += [Request(group, plural, verb) for verb in ("get", "list", "watch", "patch")]
        requests.append(Request(group, f"{plural}/status", "patch"))
    return requests


CRD = workerclusters.crd_manifest()["metadata"]["name"]
NAMESPACE = workerclusters.DEFAULT_NAMESPACE
LEASE = lease_name_for(DEFAULT_CONTROLLER_NAME)

# Every request the controller makes on the management cluster.
NEEDED = [
    *_kind_requests(),
    Request("", "events", "create"),
    Request("", "events", "patch"),
    Request("jobrelay.dev", "workerclusters", "get"),
    Request("jobrelay.dev", "workerclusters", "list"),
    Request("jobrelay.dev", "workerclusters", "watch"),
    Request("jobrelay.dev", "workerclusters/status", "patch"),
    Request("apiextensions.k8s.io", "customresourcedefinitions", "get", name=CRD),
    Request("apiextensions.k8s.io", "customresourcedefinitions", "patch", name=CRD),
    Request("apiextensions.k8s.io", "customresourcedefinitions", "create"),
    Request("", "namespaces", "get"),
    Request("", "namespaces", "list"),
    Request("", "namespaces", "watch"),
    Request("", "pods", "create"),  # dry runs only (deploy/admission-policy.yaml)
    Request("", "secrets", "get", namespace=NAMESPACE),
    Request("", "secrets", "list", namespace=NAMESPACE),
    Request("", "secrets", "watch", namespace=NAMESPACE),
    Request("coordination.k8s.io", "leases", "get", namespace=NAMESPACE, name=LEASE),
    Request("coordination.k8s.io", "leases", "update", namespace=NAMESPACE, name=LEASE),
    Request("coordination.k8s.io", "leases", "create", namespace=NAMESPACE),
    # The logs API: reviews of each caller, the manager's client CA, what it publishes.
    Request("authentication.k8s.io", "tokenreviews", "create"),
    Request("authorization.k8s.io", "subjectaccessreviews", "create"),
    # In kube-system; granted by name from the ClusterRole (kustomize's namespace would
    # move a kube-system RoleBinding into jobrelay-system).
    Request("", "configmaps", "get", name="extension-apiserver-authentication"),
    Request("", "configmaps", "get", namespace=NAMESPACE, name=API_CONFIGMAP),
    Request("", "configmaps", "patch", namespace=NAMESPACE, name=API_CONFIGMAP),
    Request("", "configmaps", "create", namespace=NAMESPACE),
]


@dataclass(frozen=True)
class Grant:
    rule: dict[str, Any]
    namespace: str | None  # None: a ClusterRole bound cluster-wide

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


def _documents() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs = []
    for file in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / file).read_text()):
            if doc:
                doc.setdefault("metadata", {})
                if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "Namespace"):
                    doc["metadata"].setdefault("namespace", kustomization["namespace"])
                docs.append(doc)
    return docs


def controller_grants() -> list[Grant]:
    """The rules bound to the controller's ServiceAccount, with where they apply."""
    docs = _documents()
    roles = {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs if "rules" in doc}
    grants = []
    for doc in docs:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        bound = any(
            (s["kind"], s["name"], s.get("namespace", doc["metadata"].get("namespace")))
            == CONTROLLER
            for s in doc["subjects"]
        )
        if not bound:
            continue
        role = roles[(doc["roleRef"]["kind"], doc["roleRef"]["name"])]
        where = doc["metadata"]["namespace"] if doc["kind"] == "RoleBinding" else None
        grants += [Grant(rule, where) for rule in role["rules"]]
    return grants


@pytest.mark.parametrize("request_", NEEDED, ids=lambda r: f"{r.verb}-{r.group}-{r.resource}")
def test_every_request_of_the_controller_is_granted(request_: Request) -> None:
    assert any(grant.allows(request_) for grant in controller_grants()), request_


def test_nothing_is_granted_beyond_what_the_controller_needs() -> None:
    """Each (group, resource, verb) granted is needed, and no wider than needed: a grant
    cluster-wide or by no name only where the request cannot name its namespace or object."""
    for grant in controller_grants():
        rule = grant.rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    names = rule.get("resourceNames")
                    needed = [
                        r
                        for r in NEEDED
                        if (r.group, r.resource, r.verb) == (group, resource, verb)
                        and (not names or r.name in names)
                    ]
                    assert needed, f"{verb} {group}/{resource} is granted but never used"
                    if grant.namespace is None:
                        assert all(r.namespace is ANY for r in needed), (
                            f"{verb} {group}/{resource}: cluster-wide, but one namespace would do"
                        )
                    if not rule.get("resourceNames"):
                        assert any(r.name is ANY for r in needed), (
                            f"{verb} {group}/{resource}: not narrowed by resourceNames"
                        )


def test_no_wildcards() -> None:
    for grant in controller_grants():
        assert "*" not in [*grant.rule["apiGroups"], *grant.rule["resources"], *grant.rule["verbs"]]
