"""jobrelay's least-privilege identity on a worker, as objects to apply.

One source: the worker chart's ``files/worker-access.yaml`` holds the ServiceAccount, its
token Secret, the cluster-wide ClusterRole and its binding, the ClusterRole bound only in
opened namespaces (and that RoleBinding), and the ValidatingAdmissionPolicy and its
binding. The chart's templates and this module (for `jobrelay clusters add
--create-service-account`, through ``fleet/serviceaccount.py``, and for the relay that binds
an opened namespace) fill in the same parts: each kind's rules and its owner hops', the
namespace create verb, the account's name and namespace, and the manager's origin.
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
    "namespace_binding",
    "namespace_role_name",
    "owner_hops",
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


def owner_hops(kinds: Iterable[Resource]) -> dict[str, list[dict[str, str]]]:
    """The shipped table of owner hops, by ``Kind.group`` (only those of ``kinds``)."""
    table: dict[str, list[dict[str, str]]] = _data()["ownerHops"]
    wanted = {f"{ref.kind}.{ref.group}" for ref in kinds}
    return {key: hops for key, hops in table.items() if key in wanted}


def access_rules(kinds: Iterable[Resource], *, create_namespaces: bool) -> list[dict[str, Any]]:
    """The cluster-wide ClusterRole's rules for a worker that runs mirrors of ``kinds``: each
    kind's (each group and plural once), their owner hops' (each once), then the rest;
    namespaces created only when allowed. (:func:`account_objects` adds the bind rules.)"""
    data = _data()
    kinds = list(kinds)
    rules: list[dict[str, Any]] = [
        fill(rule, kind) for kind in _each_once(kinds) for rule in data["mirrorRules"]
    ]
    table = data["ownerHops"]
    hops: dict[tuple[str, str], None] = dict.fromkeys(
        (hop["group"], hop["plural"])
        for ref in kinds
        for hop in table.get(f"{ref.kind}.{ref.group}", ())
    )
    rules += [fill(data["hopRule"], {"group": g, "plural": p}) for g, p in hops]
    for rule in data["clusterRole"]["rules"]:
        if create_namespaces and rule["resources"] == ["namespaces"]:
            rule["verbs"] += data["namespaceCreateVerbs"]
        rules.append(rule)
    return rules


def account_objects(
    name: str, namespace: str, rules: list[dict[str, Any]], *, bind_namespaces: bool = True
) -> dict[str, dict[str, Any]]:
    """The ServiceAccount (``serviceAccount``), its token Secret (``tokenSecret``), the
    cluster-wide ClusterRole with ``rules`` (``clusterRole``) and its binding
    (``clusterRoleBinding``), and the ClusterRole of opened namespaces (``namespaceRole``).
    ``bind_namespaces``: the account may bind that one itself (the admission policy keeps it
    to opened namespaces)."""
    data = _data()
    values = _account(name, namespace)
    objects = {
        key: fill(data[key], values)
        for key in (
            "serviceAccount", "tokenSecret", "clusterRole", "clusterRoleBinding", "namespaceRole"
        )
    }  # fmt: skip
    bind = fill(data["bindRules"], values) if bind_namespaces else []
    objects["clusterRole"]["rules"] = [*rules, *bind]
    return objects


def namespace_role_name(name: str) -> str:
    """The ClusterRole bound in each opened namespace, for ServiceAccount ``name``."""
    role_name: str = fill(_data()["namespaceRole"]["metadata"]["name"], {"name": name})
    return role_name


def namespace_binding(name: str, namespace: str, origin: str, opened: str) -> dict[str, Any]:
    """The RoleBinding that grants ServiceAccount ``namespace/name`` the ClusterRole of opened
    namespaces in ``opened`` (a namespace opened to ``origin``)."""
    values = {**_account(name, namespace), "origin": origin, "opened": opened}
    binding: dict[str, Any] = fill(_data()["namespaceBinding"], values)
    return binding


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
        "nameLiteral": _cel(name),
        "namespaceRoleLiteral": _cel(namespace_role_name(name)),
    }
    policy = fill(data["admissionPolicy"], values)
    policy["spec"]["matchConstraints"]["resourceRules"][:0] = [
        fill(data["mirrorPolicyRule"], kind) for kind in _each_once(kinds)
    ]
    return [policy, fill(data["admissionPolicyBinding"], values)]
