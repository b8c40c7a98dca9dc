"""jobrelay's least-privilege identity on a worker, as objects to apply.

One source: the worker chart's ``files/worker-access.yaml`` holds the ServiceAccount, its
token Secret, the ClusterRole and its binding, and the ValidatingAdmissionPolicy and its
binding. The chart's templates and this module (for `jobrelay clusters add
--create-service-account`, through ``fleet/serviceaccount.py``) fill in the same parts:
each kind's rules, the namespace create verb, the account's name and namespace, and the
manager's origin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from jobrelay.manifests import chart_sources
from jobrelay.manifests.chart_sources import fill
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "access_rules",
    "account_objects",
    "policy_objects",
    "token_secret_name",
]


def _data() -> dict[str, Any]:
    return chart_sources.chart_document(chart_sources.WORKER_ACCESS)


def _each_once(kinds: Iterable[Resource]) -> list[dict[str, str]]:
    """The (group, plural) of ``kinds``, each once, in order."""
    seen: dict[tuple[str, str], None] = dict.fromkeys((ref.group, ref.plural) for ref in kinds)
    return [{"group": group, "plural": plural} for group, plural in seen]


def _cel(text: str) -> str:
    return json.dumps(text)  # a CEL string literal (double quotes, escapes), as the chart's


def _account(name: str, namespace: str) -> dict[str, str]:
    return {"name": name, "namespace": namespace}


def access_rules(kinds: Iterable[Resource], *, create_namespaces: bool) -> list[dict[str, Any]]:
    """The ClusterRole's rules for a worker that runs mirrors of ``kinds``: each kind's
    (each group and plural once), then the rest; namespaces created only when allowed."""
    data = _data()
    rules: list[dict[str, Any]] = [
        fill(rule, kind) for kind in _each_once(kinds) for rule in data["mirrorRules"]
    ]
    for rule in data["clusterRole"]["rules"]:
        if create_namespaces and rule["resources"] == ["namespaces"]:
            rule["verbs"] += data["namespaceCreateVerbs"]
        rules.append(rule)
    return rules


def account_objects(
    name: str, namespace: str, rules: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The ServiceAccount (``serviceAccount``), its token Secret (``tokenSecret``), the
    ClusterRole with ``rules`` (``clusterRole``) and its binding (``clusterRoleBinding``)."""
    data = _data()
    values = _account(name, namespace)
    objects = {
        key: fill(data[key], values)
        for key in ("serviceAccount", "tokenSecret", "clusterRole", "clusterRoleBinding")
    }
    objects["clusterRole"]["rules"] = rules
    return objects


def token_secret_name(name: str) -> str:
    """The token Secret's name for ServiceAccount ``name``."""
    secret_name: str = fill(_data()["tokenSecret"]["metadata"]["name"], {"name": name})
    return secret_name


def policy_objects(
    name: str, namespace: str, username: str, origin: str, kinds: Iterable[Resource]
) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding: what the account writes (each kind's
    mirrors, namespaces, copies) goes only into namespaces labelled with ``origin``, never
    into ``kube-*`` nor the account's own namespace (``username``: the account's)."""
    data = _data()
    values = {
        **_account(name, namespace),
        "origin": origin,
        "originLiteral": _cel(origin),
        "namespaceLiteral": _cel(namespace),
        "usernameLiteral": _cel(username),
    }
    policy = fill(data["admissionPolicy"], values)
    policy["spec"]["matchConstraints"]["resourceRules"][:0] = [
        fill(data["mirrorPolicyRule"], kind) for kind in _each_once(kinds)
    ]
    return [policy, fill(data["admissionPolicyBinding"], values)]
