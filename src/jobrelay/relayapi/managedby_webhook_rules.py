"""The managedBy defaulting webhook: what it patches and how it is registered (pure).

A tenant need not write ``spec.managedBy``: in a namespace labelled
``jobrelay.dev/relay: enabled``, and for any workload labelled
``jobrelay.dev/queue``, the manager's apiserver asks the controller (a mutating
admission webhook on its API server, :data:`WEBHOOK_PATH`) and the answer adds the
kind's managedBy value at the kind's field (``spec.runPolicy.managedBy`` for
Kubeflow's jobs; the borrowed value ``--kind`` gives Ray's and Trainer's kinds).
The configuration's selectors choose what is sent; the answer still never
touches a workload with a managedBy of its own or labelled
``jobrelay.dev/relay: disabled``. It only defaults: every answer allows.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.vocabulary.names import QUEUE_LABEL

__all__ = [
    "FAIL",
    "FAILURE_POLICIES",
    "IGNORE",
    "MAX_REVIEW_BYTES",
    "NAMESPACE_WEBHOOK",
    "QUEUED_WEBHOOK",
    "RELAY_DISABLED",
    "RELAY_ENABLED",
    "RELAY_LABEL",
    "SCHEMA_DEFAULTS",
    "WEBHOOK_CONFIGURATION",
    "WEBHOOK_PATH",
    "WITHOUT_MANAGED_BY",
    "ManagedByDefault",
    "admission_answer",
    "managed_by_default",
    "managed_by_patch",
    "url_client_config",
    "webhook_configuration",
]

# The label of a namespace (enabled) or a workload (disabled) that says whether it relays.
RELAY_LABEL = "jobrelay.dev/relay"
RELAY_ENABLED = "enabled"
RELAY_DISABLED = "disabled"
WEBHOOK_PATH = "/mutate/managedby"
WEBHOOK_CONFIGURATION = "jobrelay-managedby"
NAMESPACE_WEBHOOK = "namespaces.managedby.jobrelay.dev"
QUEUED_WEBHOOK = "queued.managedby.jobrelay.dev"
FAIL = "Fail"
IGNORE = "Ignore"
FAILURE_POLICIES = (FAIL, IGNORE)
# The apiserver takes request bodies of at most 3 MiB; a review carries one such object.
MAX_REVIEW_BYTES = 3 * 1024 * 1024 + 64 * 1024
_REVIEW_VERSION = "admission.k8s.io/v1"
_TIMEOUT_SECONDS = 5
# The managedBy the kinds' CRD schemas write themselves when the field is left out
# (``WorkloadKind.crd_managed_by_default``: Trainer's TrainJob): such a value says
# nothing of who the tenant wants, so it is replaced like an absent field.
SCHEMA_DEFAULTS = tuple(sorted({
    kind.crd_managed_by_default for kind in DEDICATED.values() if kind.crd_managed_by_default
}))  # fmt: skip
# Sent only what has no managedBy of its own (at either kind's field; a schema's default
# is none): a workload that says who runs it is never refused while no controller
# answers the webhook.
WITHOUT_MANAGED_BY = {
    "name": "without-managed-by",
    "expression": "!has(object.spec) || !(has(object.spec.managedBy) || "
    "(has(object.spec.runPolicy) && has(object.spec.runPolicy.managedBy))) || "
    "(has(object.spec.managedBy) && object.spec.managedBy in ["
    + ", ".join(f"'{value}'" for value in SCHEMA_DEFAULTS)
    + "])",
}


@dataclass(frozen=True, slots=True)
class ManagedByDefault:
    """One kind's default: where it is served, where it keeps managedBy, and the value."""

    group: str
    version: str
    plural: str
    field: tuple[str, ...]
    value: str
    # What its CRD's schema writes there when left out (replaced like an absent field).
    schema_default: str | None = None


def managed_by_default(kind: WorkloadKind, value: str) -> ManagedByDefault:
    """The default of a configured kind claiming ``value``."""
    ref = kind.ref
    return ManagedByDefault(
        ref.group, ref.version, ref.plural, kind.managed_by_field, value,
        kind.crd_managed_by_default,
    )  # fmt: skip


def _pointer(path: Sequence[str]) -> str:
    return "".join("/" + step.replace("~", "~0").replace("/", "~1") for step in path)


def managed_by_patch(obj: Mapping[str, Any], default: ManagedByDefault) -> list[dict[str, Any]]:
    """The JSONPatch that sets the default on ``obj``; empty when it must stay as it is:
    it has a managedBy of its own (its CRD schema's default is none), it is labelled
    ``jobrelay.dev/relay: disabled``, or its field's parents are not objects (the
    apiserver's validation then speaks)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, Mapping) or labels.get(RELAY_LABEL) == RELAY_DISABLED:
        return []
    node: Any = obj
    for depth, step in enumerate(default.field):
        if not isinstance(node, Mapping):
            return []
        below = node.get(step)
        if below is None:
            # The first step missing: add it with the rest of the path under it.
            value: Any = default.value
            for inner in reversed(default.field[depth + 1 :]):
                value = {inner: value}
            return [{"op": "add", "path": _pointer(default.field[: depth + 1]), "value": value}]
        node = below
    if default.schema_default is not None and node == default.schema_default:
        return [{"op": "replace", "path": _pointer(default.field), "value": default.value}]
    return []  # a managedBy of its own (any other value)


def _review(uid: str, patch: list[dict[str, Any]]) -> bytes:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return json.dumps(
        {"apiVersion": _REVIEW_VERSION, "kind": "AdmissionReview", "response": response}
    ).encode()


def _status(code: int, message: str) -> bytes:
    reason = {400: "BadRequest", 413: "RequestEntityTooLarge"}[code]
    return json.dumps(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    ).encode()  # fmt: skip


def admission_answer(body: bytes, defaults: Sequence[ManagedByDefault]) -> tuple[int, bytes]:
    """The HTTP code and body answering an AdmissionReview (v1) ``body``: 200 with the
    review's response (allowed, with the patch when one applies), 413 for a body over
    :data:`MAX_REVIEW_BYTES`, 400 with a ``Status`` for anything not a review."""
    if len(body) > MAX_REVIEW_BYTES:
        return 413, _status(413, f"an AdmissionReview of at most {MAX_REVIEW_BYTES} bytes")
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return 400, _status(400, "the body is not JSON")
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        return 400, _status(400, "the body is not an AdmissionReview")
    if review.get("apiVersion") != _REVIEW_VERSION:
        return 400, _status(400, f"only {_REVIEW_VERSION} AdmissionReviews")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        return 400, _status(400, "the AdmissionReview has no request with a uid")
    return 200, _review(request["uid"], _request_patch(request, defaults))


def _request_patch(
    request: Mapping[str, Any], defaults: Sequence[ManagedByDefault]
) -> list[dict[str, Any]]:
    resource = request.get("resource")
    obj = request.get("object")
    if (
        request.get("operation") != "CREATE"
        or request.get("subResource")
        or not isinstance(resource, Mapping)
        or not isinstance(obj, Mapping)
    ):
        return []
    for default in defaults:
        if (resource.get("group"), resource.get("resource")) == (default.group, default.plural):
            return managed_by_patch(obj, default)
    return []


def url_client_config(address: str, port: int, ca_pem: str) -> dict[str, Any]:
    """The clientConfig of a controller outside the manager: its own address (the
    manager's apiserver on this host dials it) and the CA of its serving certificate."""
    return {
        "url": f"https://{address}:{port}{WEBHOOK_PATH}",
        "caBundle": base64.b64encode(ca_pem.encode()).decode(),
    }


def _decodes(ca_bundle: str) -> bool:
    try:
        base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def webhook_configuration(
    defaults: Sequence[ManagedByDefault], client_config: Mapping[str, Any], failure_policy: str
) -> dict[str, Any]:
    """``MutatingWebhookConfiguration jobrelay-managedby``: one webhook for the enabled
    namespaces, one for queue-labelled workloads anywhere, neither for a workload labelled
    disabled; CREATE of every configured kind. (The chart renders the same objects:
    charts/jobrelay/templates/api-certificate.yaml.)"""
    if failure_policy not in FAILURE_POLICIES:
        raise ValueError(f"failure policy {failure_policy!r}: one of {', '.join(FAILURE_POLICIES)}")
    if not _decodes(str(client_config.get("caBundle", ""))):
        raise ValueError("the clientConfig's caBundle is not base64")
    not_disabled = {"key": RELAY_LABEL, "operator": "NotIn", "values": [RELAY_DISABLED]}
    rules = [
        {"apiGroups": [group], "apiVersions": [version], "resources": sorted(plurals),
         "operations": ["CREATE"], "scope": "Namespaced"}
        for (group, version), plurals in sorted(_by_group_version(defaults).items())
    ]  # fmt: skip

    def webhook(name: str, selectors: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name,
            "clientConfig": dict(client_config),
            "rules": rules,
            **selectors,
            "matchConditions": [dict(WITHOUT_MANAGED_BY)],
            "failurePolicy": failure_policy,
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": _TIMEOUT_SECONDS,
            "reinvocationPolicy": "Never",
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": WEBHOOK_CONFIGURATION,
            "labels": {"app.kubernetes.io/name": "jobrelay", "app.kubernetes.io/component": "api"},
        },
        "webhooks": [
            webhook(NAMESPACE_WEBHOOK, {
                "namespaceSelector": {"matchLabels": {RELAY_LABEL: RELAY_ENABLED}},
                "objectSelector": {"matchExpressions": [not_disabled]},
            }),
            webhook(QUEUED_WEBHOOK, {
                "objectSelector": {"matchExpressions": [
                    {"key": QUEUE_LABEL, "operator": "Exists"}, not_disabled,
                ]},
            }),
        ],
    }  # fmt: skip


def _by_group_version(defaults: Sequence[ManagedByDefault]) -> dict[tuple[str, str], set[str]]:
    grouped: dict[tuple[str, str], set[str]] = {}
    for default in defaults:
        grouped.setdefault((default.group, default.version), set()).add(default.plural)
    return grouped
