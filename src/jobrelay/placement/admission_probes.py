"""Whether the management cluster would admit the workload's pods. Pure.

The manager never creates pods for a workload it delegates, so its Pod Security
level (and any other pod policy: a LimitRange, a validating webhook or policy)
would only ever see the Job, never a pod. jobrelay closes that gap by asking
the manager's own admission: before a workload is first placed, a Pod built
from each of its pod templates is created in the workload's namespace as a
server-side dry run. The apiserver, not our reading of the Pod Security
Standards, judges it, with the manager's own version, levels, exemptions and
webhooks; nothing is stored.

This module builds those probe pods and reads the answer; the request itself is
the reconciler's.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.json_types import JsonObj

# Probe pods are named by the apiserver from this prefix (the answer quotes the name).
PROBE_NAME_PREFIX = "jobrelay-admission-probe-"
# Labels that carry a namespace's Pod Security levels; copied to namespaces jobrelay
# creates on workers, so the workers enforce what the manager's namespace does.
POD_SECURITY_LABEL_PREFIX = "pod-security.kubernetes.io/"

# Event reasons.
POD_SECURITY_VIOLATION = "PodSecurityViolation"
ADMISSION_REFUSED = "PodAdmissionRefused"
ADMISSION_UNCHECKED = "PodAdmissionUnchecked"

# The pod's PriorityClass is judged as the pod's would be: its name is kept, so the
# manager's Priority admission resolves it (a class unknown on the manager is refused)
# and its ResourceQuotas' PriorityClass scopes apply (how Kubernetes confines critical
# classes). Only the integer the Priority admission computes is dropped (a template
# that states it is refused unless it matches). The ServiceAccount is judged too: a
# workload may name only one that exists in its namespace on the manager, so a tenant
# cannot borrow a worker namespace's ServiceAccount the manager never let it use.
_UNJUDGED_FIELDS = ("priority",)

_FORBIDDEN_PREFIX = re.compile(r'^pods? "[^"]*" is forbidden: ')
# ResourceQuota's own refusal, whole (k8s.io/apiserver admission/plugin/resourcequota):
# `pods "<probe>" is forbidden: exceeded quota: <quota>, requested: <r>, used: <u>,
# limited: <l>`, each list `name=quantity,...`. Only this shape is quota: a webhook's
# or a policy's message starts with its own words ("admission webhook ... denied the
# request: ", "ValidatingAdmissionPolicy ... denied request: ") and may quote anything.
_RESOURCE_AMOUNT = r"[A-Za-z0-9./_-]+=[0-9A-Za-z.+-]+"  # requests.nvidia.com/gpu=2, cpu=500m
_RESOURCE_LIST = rf"{_RESOURCE_AMOUNT}(?:,{_RESOURCE_AMOUNT})*"
_QUOTA_REFUSAL = re.compile(
    r'(?P<resource>[a-z0-9.-]+) "(?P<name>[a-z0-9.-]*)" is forbidden: exceeded quota: '
    rf"[a-z0-9.-]+, requested: {_RESOURCE_LIST}, used: {_RESOURCE_LIST}, limited: {_RESOURCE_LIST}"
)
# The ServiceAccount admission plugin's refusal: `error looking up service account
# <namespace>/<name>: serviceaccount "<name>" not found` (or another lookup error).
_SERVICE_ACCOUNT_REFUSAL = re.compile(
    r"error looking up service account (?P<namespace>[a-z0-9.-]+)/(?P<name>[a-z0-9.-]+): "
    r"(?P<cause>.*)",
    re.DOTALL,
)
_RBAC_REFUSAL = re.compile(r'cannot create resource "pods"')
_MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True)
class AdmissionVerdict:
    """What the manager's admission said of the workload's pods.

    Not ``allowed``: no worker may run them yet, and ``reason``/``message`` say why:
    the rule that refuses them, or (``PodAdmissionUnchecked``) that jobrelay could
    not ask.
    """

    allowed: bool
    reason: str = ""
    message: str = ""


ALLOWED = AdmissionVerdict(allowed=True)


def probe_pods(templates: list[JsonObj], namespace: str) -> list[JsonObj]:
    """One dry-run Pod per pod template, in the workload's namespace."""
    pods = []
    for template in templates:
        metadata = template.get("metadata") or {}
        spec = copy.deepcopy(template.get("spec") or {})
        if not isinstance(spec, dict):
            spec = {}
        for name in _UNJUDGED_FIELDS:
            spec.pop(name, None)
        probe_metadata: JsonObj = {"generateName": PROBE_NAME_PREFIX, "namespace": namespace}
        for part in ("labels", "annotations"):
            if isinstance(metadata, dict) and isinstance(metadata.get(part), dict):
                probe_metadata[part] = dict(metadata[part])
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": probe_metadata, "spec": spec})
    return pods


def verdict_of_refusal(code: int, reason: str, message: str) -> AdmissionVerdict | None:
    """The verdict an apiserver refusal of a probe pod means; None when it says nothing
    about admission (a time-out, a 5xx: ask again later)."""
    text = _FORBIDDEN_PREFIX.sub("", message)[:_MAX_MESSAGE]
    if code == 403 and _RBAC_REFUSAL.search(message):
        return AdmissionVerdict(
            allowed=False,
            reason=ADMISSION_UNCHECKED,
            message=(
                "jobrelay may not ask the management cluster whether it admits this workload's "
                "pods (a dry-run create of pods: grant `create` on pods to its ServiceAccount, "
                "as the Helm chart does); it is not placed until it may"
            ),
        )
    if is_quota_refusal(code, reason, message, resource="pods", name_prefix=PROBE_NAME_PREFIX):
        # The manager's ResourceQuota counts its own pods; these will run on a worker.
        # Quota is checked after every policy, so the policies admitted it. (A quota's
        # PriorityClass scope that refuses a class outright is the apiserver's
        # limitedResources: "insufficient quota to match these scopes", refused below.)
        return ALLOWED
    service_account = _SERVICE_ACCOUNT_REFUSAL.match(text) if code == 403 else None
    if service_account is not None:
        return _service_account_refused(
            service_account["namespace"], service_account["name"], service_account["cause"]
        )
    if code == 403 and "violates PodSecurity" in message:
        return AdmissionVerdict(
            allowed=False,
            reason=POD_SECURITY_VIOLATION,
            message=(
                f"the namespace's Pod Security forbids this workload's pods, so it runs on no "
                f"worker cluster: {text}"
            ),
        )
    if code in (400, 403, 422):
        return AdmissionVerdict(
            allowed=False,
            reason=ADMISSION_REFUSED,
            message=(
                f"the management cluster refuses this workload's pods ({reason}), so it runs on "
                f"no worker cluster: {text}"
            ),
        )
    return None


def is_quota_refusal(
    code: int, reason: str, message: str, *, resource: str = "", name_prefix: str = ""
) -> bool:
    """Whether an apiserver's refusal is its ResourceQuota admission's own (a used-up
    quota), of a ``resource`` (any, if empty) named from ``name_prefix``; never a
    webhook's or a policy's message that quotes one."""
    if code != 403 or reason != "Forbidden":
        return False
    found = _QUOTA_REFUSAL.fullmatch(message)
    return (
        found is not None
        and (not resource or found["resource"] == resource)
        and found["name"].startswith(name_prefix)
    )


def _service_account_refused(namespace: str, name: str, cause: str) -> AdmissionVerdict:
    if cause == f'serviceaccount "{name}" not found':
        if name == "default":
            # The ServiceAccount controller makes it just after the namespace: asked again.
            why = (
                f"the namespace {namespace} has no ServiceAccount default yet (Kubernetes "
                "creates it shortly after the namespace); asked again shortly"
            )
        else:
            why = (
                f"its ServiceAccount {name} does not exist in namespace {namespace} on the "
                "management cluster: a workload may name only a ServiceAccount of its "
                "namespace there (create it there, and on the workers); asked again shortly"
            )
    else:
        why = f"its ServiceAccount {namespace}/{name} cannot be looked up: {cause}"
    return AdmissionVerdict(
        allowed=False,
        reason=ADMISSION_REFUSED,
        message=(
            f"the management cluster refuses this workload's pods, so it runs on no worker "
            f"cluster: {why}"
        )[:_MAX_MESSAGE],
    )


def pod_security_labels(labels: Mapping[str, Any] | None) -> dict[str, str]:
    """The Pod Security labels of a namespace (enforce, audit, warn and their versions)."""
    return {
        key: value
        for key, value in (labels or {}).items()
        if key.startswith(POD_SECURITY_LABEL_PREFIX)
    }
