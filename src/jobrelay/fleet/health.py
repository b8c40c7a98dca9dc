"""What a worker's ``Connected`` condition says, and why: pure functions, no I/O.

The pool probes each worker (``GET /version`` with a short timeout, every few
seconds) and looks at its mirror informers; :func:`verdict` turns both into
the condition, and :func:`classify` names the reason of any failure, so the
``WorkerCluster`` status tells an operator what to fix:

============================  ===============================================
reason                        meaning
============================  ===============================================
``Connected``                 it answers, and at least one kind is listed
``Unreachable``               connection refused, DNS, a broken connection
``Timeout``                   no answer in time (a hung or overloaded apiserver)
``TLSError``                  the handshake failed (wrong CA, bad certificate)
``Unauthorized``              401: the credentials are refused (or an exec plugin failed)
``Forbidden``                 403: the credentials lack a verb on a resource
``InvalidKubeconfig``         the Secret's kubeconfig cannot be read or used
``NotListed``                 it answers but has not listed its mirrors yet
``ApiError``                  any other refusal (5xx, 429, ...), with its code
============================  ===============================================
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.fleet.workerclusters import RegistryError
from jobrelay.kube.api import ApiError

__all__ = [
    "HEARTBEAT_SECONDS",
    "NOT_LISTED",
    "Verdict",
    "Written",
    "classify",
    "lost_in",
    "needs_write",
    "transition_time",
    "verdict",
]

# The reason of a worker that answers but whose mirror caches are still listing.
NOT_LISTED = "NotListed"

# A healthy worker's unchanged status is written again (with a fresh
# lastContactTime) at most this often.
HEARTBEAT_SECONDS = 60.0

# What an SSL failure looks like once httpx has turned it into a ConnectError.
_TLS_MARKERS = ("SSL", "TLS", "CERTIFICATE", "certificate", "handshake")
# The apiserver's RBAC refusal: `User "x" cannot list resource "jobs" in API group "batch" ...`,
# or for a URL that is no resource: `... cannot get path "/version"`.
_FORBIDDEN = re.compile(
    r'cannot (?P<verb>\w+) (?:resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?|path "(?P<path>[^"]+)")'
)


@dataclass(frozen=True)
class Verdict:
    """The ``Connected`` condition a worker deserves now."""

    connected: bool
    reason: str
    message: str


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
    if error.code == 403 and "exceeded quota" in message:
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


def verdict(
    probe_error: BaseException | None,
    informers: Mapping[str, tuple[bool, BaseException | None]],
    server: str = "",
) -> Verdict:
    """The condition from the last probe (None: it answered, or none ran yet) and, per
    kind, whether its mirror informer has listed and its last error; a failed probe's
    message starts with the ``server`` it went to."""
    if probe_error is not None:
        reason, message = classify(probe_error)
        return Verdict(False, reason, f"{server}: {message}" if server else message)
    listed = [kind for kind, (synced, _) in informers.items() if synced]
    not_listed = [kind for kind, (synced, _) in informers.items() if not synced]
    if not listed:
        for kind, (_, error) in informers.items():
            if error is not None:
                reason, message = classify(error)
                return Verdict(False, reason, f"cannot list {kind}: {message}")
        return Verdict(False, NOT_LISTED, f"has not listed {', '.join(not_listed)} yet")
    message = f"mirrors listed and watched ({', '.join(listed)})"
    if not_listed:
        message += (
            f"; not listed (no CRD there, or no rights): {', '.join(not_listed)}, "
            "so no such workload is placed here"
        )
    return Verdict(True, "Connected", message)


@dataclass(frozen=True)
class Written:
    """What the pool last wrote to one WorkerCluster's status, and when (monotonic seconds)."""

    condition: Mapping[str, Any]
    active: int | None
    kubernetes_version: str | None
    at: float
    lost_time: str | None = None
    observed_generation: int | None = None


def needs_write(
    previous: Written | None,
    condition: Mapping[str, Any],
    active: int | None,
    kubernetes_version: str | None,
    now: float,
    *,
    lost_time: str | None = None,
    observed_generation: int | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> bool:
    """Whether the status must be written: on any change, and for a connected
    worker once per ``heartbeat`` (to advance lastContactTime)."""
    if previous is None:
        return True
    if (previous.condition, previous.active, previous.lost_time) != (condition, active, lost_time):
        return True
    if observed_generation is not None and previous.observed_generation != observed_generation:
        return True
    if kubernetes_version and previous.kubernetes_version != kubernetes_version:
        return True
    return condition.get("status") == "True" and now - previous.at >= heartbeat


def lost_in(down_since: float | None, now: float, timeout: float) -> float | None:
    """Seconds until a worker down since ``down_since`` is declared lost (<= 0: it is);
    None for a worker that is up. Times are seconds since the epoch."""
    if down_since is None:
        return None
    return timeout - (now - down_since)


def transition_time(existing: Mapping[str, Any] | None, status: str, now: str) -> str:
    """The condition's lastTransitionTime: kept while its status stays, else ``now``."""
    if existing and existing.get("status") == status and existing.get("lastTransitionTime"):
        return str(existing["lastTransitionTime"])
    return now
