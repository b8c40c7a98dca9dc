"""Workload kinds: one pure adapter per kind behind one interface (:class:`WorkloadKind`).

Nothing here does I/O; an import-linter contract keeps the kube layer out.
"""

from jobrelay.kinds.base import Finish, PodSet, WorkloadKey, WorkloadKind
from jobrelay.kinds.catalog import DEFAULT_KINDS, KindError, kinds_from_names
from jobrelay.vocabulary.json_types import JsonObj

__all__ = [
    "DEFAULT_KINDS",
    "Finish",
    "JsonObj",
    "KindError",
    "PodSet",
    "WorkloadKey",
    "WorkloadKind",
    "kinds_from_names",
]
