"""docs/security.md, "What each credential can do", is what the shipped manifests grant:
the worker chart and what `jobrelay clusters add --create-service-account` applies (with
the RoleBinding the relay makes in an opened namespace), and the manager chart's
controller ServiceAccount, each rendered with its default values (plus one opened
namespace), compared with the table row by row (issue 33)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.chart_render import REPO, chart_tools, render

from jobrelay.fleet import serviceaccount
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.manifests import worker_access

DOC = REPO / "docs" / "security.md"
WORKER_CHART = REPO / "charts" / "jobrelay-worker"
ORIGIN = "manager-a"
OPENED = "team-a"
RELEASE_NAMESPACE = "jobrelay-system"

# (credential, resource, name, verb, scope): one grant.
Grant = tuple[str, str, str, str, str]

# Kubernetes' roles the manager chart binds (their rules as the apiserver bootstraps them).
BUILT_IN = {
    "system:auth-delegator": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
         "verbs": ["create"]},
    ],
    "extension-apiserver-authentication-reader": [
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["extension-apiserver-authentication"],
         "verbs": ["get", "list", "watch"]},
    ],
}  # fmt: skip


def documented() -> set[Grant]:
    """The table's rows, one grant per verb and name (``<origin>`` filled in)."""
    text = DOC.read_text()
    section = text[text.index("## What each credential can do") :]
    section = section[: section.index("\n## ", 1)]
    grants: set[Grant] = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] not in ("worker", "controller"):
            continue
        credential, resource, names, verbs, scope = cells
        for name in re.findall(r"`([^`]+)`", names) or [names]:
            for verb in verbs.split(", "):
                grants.add(
                    (credential, resource.strip("`"), name.replace("<origin>", ORIGIN), verb, scope)
                )
    return grants


def _grants(credential: str, rules: Iterable[Mapping[str, Any]], scope: str) -> set[Grant]:
    return {
        (credential, f"{group}/{resource}" if group else resource, name, verb, scope)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for name in rule.get("resourceNames") or ["any"]
        for verb in rule["verbs"]
    }


def bound(
    credential: str,
    docs: list[dict[str, Any]],
    subject: tuple[str, str],
    scope_of: Mapping[str | None, str],
) -> set[Grant]:
    """What the bindings of ``docs`` grant ServiceAccount ``subject`` (namespace, name),
    each binding's scope named by ``scope_of`` its namespace (None: cluster-wide)."""
    roles = {
        (doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")): doc["rules"]
        for doc in docs
        if doc["kind"] in ("Role", "ClusterRole")
    }
    found: set[Grant] = set()
    for doc in docs:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        accounts = {
            (s.get("namespace"), s["name"])
            for s in doc["subjects"]
            if s["kind"] == "ServiceAccount"
        }
        if subject not in accounts:
            continue
        where = doc["metadata"].get("namespace") if doc["kind"] == "RoleBinding" else None
        ref = doc["roleRef"]
        rules = (
            BUILT_IN.get(ref["name"])
            or roles[(ref["kind"], ref["name"], where if ref["kind"] == "Role" else None)]
        )
        found |= _grants(credential, rules, scope_of[where])
    return found


def worker_in_chart() -> set[Grant]:
    docs = render(
        chart_tools().helm, {"origin": ORIGIN, "namespaces": [OPENED]}, chart=WORKER_CHART,
        release="jobrelay-worker", namespace=RELEASE_NAMESPACE,
    )  # fmt: skip
    subject = (RELEASE_NAMESPACE, serviceaccount.account_name(ORIGIN))
    return bound("worker", docs, subject, {None: "cluster", OPENED: "opened namespaces"})


def worker_by_the_cli() -> set[Grant]:
    """What `clusters add --create-service-account` applies, and the RoleBinding the relay
    makes in a namespace it opens."""
    account = serviceaccount.WorkerAccount(RELEASE_NAMESPACE, serviceaccount.account_name(ORIGIN))
    kinds = [JobKind.ref]
    rules = serviceaccount.worker_rules(kinds, create_namespaces=True)
    policy = serviceaccount.admission_policy(account, ORIGIN, kinds)
    docs = [manifest for _, manifest in serviceaccount.manifests(account, rules, policy)]
    docs.append(worker_access.namespace_binding(account.name, account.namespace, ORIGIN, OPENED))
    subject = (account.namespace, account.name)
    return bound("worker", docs, subject, {None: "cluster", OPENED: "opened namespaces"})


def controller(values: dict[str, Any]) -> set[Grant]:
    docs = render(chart_tools().helm, values, namespace=RELEASE_NAMESPACE)
    scopes = {None: "cluster", RELEASE_NAMESPACE: "own namespace", "kube-system": "kube-system"}
    for name in values.get("dependencies", {}).get("secretNamespaces", []):
        scopes[name] = "Secret-copying namespaces"
    return bound("controller", docs, (RELEASE_NAMESPACE, "jobrelay"), scopes)


def _of(grants: set[Grant], credential: str) -> set[Grant]:
    return {grant for grant in grants if grant[0] == credential}


def test_the_worker_credential_is_what_the_doc_says() -> None:
    table = _of(documented(), "worker")
    assert len(table) > 20  # the table was found and read
    assert worker_in_chart() == table
    assert worker_by_the_cli() == table


def test_the_controller_is_what_the_doc_says() -> None:
    table = _of(documented(), "controller")
    assert controller({"dependencies": {"secretNamespaces": [OPENED]}}) == table
    # By default no namespace is opened to Secret copying: Secrets only in its own.
    defaults = controller({})
    assert defaults == {g for g in table if g[4] != "Secret-copying namespaces"}


def test_no_credential_reads_secrets_cluster_wide() -> None:
    everything = worker_in_chart() | worker_by_the_cli() | controller({})
    assert not [g for g in everything if g[1] == "secrets" and g[4] == "cluster"]
    assert not [g for g in everything if g[3] in ("escalate", "impersonate", "*")]


def test_the_doc_says_no_false_things_about_secrets() -> None:
    text = Path(DOC).read_text()
    assert "cannot read Secrets" not in text
    assert "cluster-wide\n`get, list, watch`" not in text
