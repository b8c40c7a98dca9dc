"""Why a worker refused a request, in words: pure functions, no I/O.

:func:`classify` names the reason of any failure for the ``WorkerCluster``'s
``Connected`` condition (and for a capacity that cannot be listed), so the
status tells an operator what to fix:

============================  ===============================================
reason                        meaning
============================  ===============================================
``Unreachable``               connection refused, DNS, a broken connection
``Timeout``                   no answer in time (a hung or overloaded apiserver)
``TLSError``                  the handshake failed (wrong CA, bad certificate)
``Unauthorized``              401: the credentials are refused (or an exec plugin failed)
``Forbidden``                 403: the credentials lack a verb on a resource
``InvalidKubeconfig``         the Secret's kubeconfig cannot be read or used
``ApiError``                  any other refusal (5xx, 429, ...), with its code
============================  ===============================================

:func:`refusal_for_tenants` says what a workload's tenant may read of a refusal.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping

from jobrelay.fleet.workerclusters import RegistryError
from jobrelay.kube.errors import ApiError
from jobrelay.placement.admission_probes import is_quota_refusal

__all__ = ["classify", "refusal_for_tenants"]

# What an SSL failure looks like once httpx has turned it into a ConnectError.
_TLS_MARKERS = ("SSL", "TLS", "CERTIFICATE", "certificate", "handshake")
# The apiserver's RBAC refusal: `User "x" cannot list resource "jobs" in API group "batch" ...`,
# or for a URL that is no resource: `... cannot get path "/version"`.
_FORBIDDEN = re.compile(
    r'cannot (?P<verb>\w+) (?:resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?|path "(?P<path>[^"]+)")'
)


def classify(error: BaseException) -> tuple[str, str]:
    """The condition reason and a one-line message for why a request to a worker failed."""
    if isinstance(error, ApiError):
        return _classify_api_error(error)
    if isinstance(error, RegistryError | ValueError):  # KubeconfigError is a ValueError
        return "InvalidKubeconfig", str(error)
    if isinstance(error, TimeoutError):
        return "Timeout", "no answer in time"
    if isinstance(error, ssl.SSLError):
        return "TLSError", f"TLS handshake failed: {error}"
    if isinstance(error, OSError):
        return "Unreachable", f"cannot connect: {error}"
    return "ApiError", f"{type(error).__name__}: {error}"


def _classify_api_error(error: ApiError) -> tuple[str, str]:
    message = error.message
    if error.reason == "ResponseTooLarge":  # the apiserver sent more than is read
        return "ResponseTooLarge", message
    if error.code == 0:
        if error.reason == "Timeout":
            return "Timeout", f"no answer in time ({message})"
        if error.reason == "Unauthorized":  # an exec credential plugin failed
            return "Unauthorized", f"cannot get credentials: {message}"
        if any(marker in message for marker in _TLS_MARKERS):
            return "TLSError", f"TLS handshake failed: {message}"
        return "Unreachable", f"cannot connect: {message}"
    if error.code == 401 or error.reason == "Unauthorized":
        return "Unauthorized", f"the apiserver refuses the credentials (401): {message}"
    if error.code == 403 or error.reason == "Forbidden":
        return "Forbidden", _forbidden_message(message)
    if error.code == 504 or error.reason == "Timeout":
        return "Timeout", f"the apiserver timed out ({error.code}): {message}"
    return "ApiError", f"{error.code} {error.reason}: {message}"


def _forbidden_message(message: str) -> str:
    found = _FORBIDDEN.search(message)
    if found is None:
        return f"the credentials lack a permission (403): {message}"
    if found["path"]:
        missing = f"{found['verb']} on path {found['path']}"
    else:
        group = found["group"] or ""
        missing = f"{found['verb']} on {found['resource']}" + (f".{group}" if group else "")
    return f"the credentials may not {missing} (403): {message}"


def refusal_for_tenants(error: ApiError) -> str:
    """What the workload's tenant may read of a worker's refusal: its HTTP status and
    which kind of rule refused, never the worker's own words, which may describe other
    tenants' objects, the worker's quotas or its setup (the controller logs those)."""
    message = error.message
    what = ""
    if is_quota_refusal(error.code, error.reason, message):
        what = "a ResourceQuota of the namespace there is used up"
    elif error.code == 403 and _FORBIDDEN.search(message):
        what = (
            "jobrelay's credentials for that worker lack a permission (a fleet admin must "
            "grant it; its WorkerCluster status and the controller's log say which)"
        )
    elif "violates PodSecurity" in message:
        what = "the namespace's Pod Security level there forbids its pods"
    elif "admission webhook" in message:
        what = "an admission webhook there denied it"
    elif error.is_invalid:
        fields = sorted(
            {
                str(cause.get("field"))
                for cause in error.details.get("causes") or []
                if isinstance(cause, Mapping) and cause.get("field")
            }
        )[:5]
        what = "it finds the object invalid" + (
            f" (fields: {', '.join(fields)}; does its Kubernetes version know them?)"
            if fields
            else ""
        )
    elif error.code == 403:
        what = "a policy there refuses it"
    return f"HTTP {error.code} {error.reason}" + (f": {what}" if what else "")
