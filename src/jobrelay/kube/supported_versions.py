"""Which Kubernetes versions jobrelay supports, and whether an apiserver's ``/version`` is
one (pure).

The manager needs 1.32: `spec.managedBy` on Jobs (KEP-4368) is beta and on by default from
1.32; before it the built-in Job controller would run a delegated Job on the manager too.
A worker needs 1.30: the ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) of
its least-privilege identity. The charts' ``kubeVersion`` says the same (a unit test keeps
them equal), and README's compatibility table explains both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MANAGER_MINIMUM", "WORKER_MINIMUM", "reported_version", "too_old"]

MANAGER_MINIMUM = (1, 32)
WORKER_MINIMUM = (1, 30)

# "v1.32.4", "v1.32.4-eks-1234", "1.33"; a minor of "32+" (as some clouds report it).
_GIT_VERSION = re.compile(r"v?(\d+)\.(\d+)")
_NUMBER = re.compile(r"(\d+)")


def reported_version(info: Mapping[str, Any]) -> tuple[int, int] | None:
    """(major, minor) of an apiserver's ``/version``: its gitVersion, else its major and
    minor fields; None when neither reads as numbers."""
    found = _GIT_VERSION.match(str(info.get("gitVersion") or ""))
    if found:
        return int(found.group(1)), int(found.group(2))
    major = _NUMBER.match(str(info.get("major") or ""))
    minor = _NUMBER.match(str(info.get("minor") or ""))
    if major and minor:
        return int(major.group(1)), int(minor.group(1))
    return None


def too_old(
    info: Mapping[str, Any], minimum: tuple[int, int] = MANAGER_MINIMUM, *, what: str = "management"
) -> str | None:
    """One line saying why this apiserver is older than ``minimum``; None when it is not,
    or when its version cannot be read (a distribution's odd string is not refused)."""
    version = reported_version(info)
    if version is None or version >= minimum:
        return None
    shown = str(info.get("gitVersion") or f"{version[0]}.{version[1]}")
    needs = f"{minimum[0]}.{minimum[1]}"
    why = (
        "spec.managedBy on Jobs, beta and on by default from 1.32: before it the Job "
        "controller would run delegated Jobs on the manager too"
        if minimum == MANAGER_MINIMUM
        else "the ValidatingAdmissionPolicy of its identity"
    )
    return (
        f"the {what} cluster runs Kubernetes {shown}; jobrelay needs {needs} or later ({why}): "
        "upgrade it (README.md, Compatibility)"
    )
