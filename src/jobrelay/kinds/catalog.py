"""Which kinds a controller dispatches: ``Kind.version.group`` names to adapters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from jobrelay.kinds.base import SPEC_MANAGED_BY, WorkloadKind
from jobrelay.kinds.generic import DEFAULT_FINISHED_CONDITIONS, GenericKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kinds.kubeflow import MPIJobKind, PyTorchJobKind
from jobrelay.kinds.pod_ownership import PodOwnerLabels
from jobrelay.kinds.ray import RayClusterKind, RayJobKind
from jobrelay.kinds.trainjob import TrainJobKind
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "DEDICATED",
    "DEFAULT_FINISHED_CONDITIONS",
    "DEFAULT_KIND",
    "DEFAULT_KINDS",
    "POD_OWNER_LABELS",
    "KindError",
    "dedicated_by_kind",
    "default_plural",
    "kinds_from_names",
    "parse_kind_name",
]

# Kinds with an adapter of their own; any other kind gets the generic one.
DEDICATED: dict[str, WorkloadKind] = {
    kind.name: kind
    for kind in (
        JobKind(),
        JobSetKind(),
        RayJobKind(),
        RayClusterKind(),
        TrainJobKind(),
        PyTorchJobKind(),
        MPIJobKind(),
    )
}
# What a controller dispatches unless told otherwise (`jobrelay run --kind`), and what a
# command means by a workload whose kind it is not told.
DEFAULT_KIND: WorkloadKind = DEDICATED[JobKind.ref.name]
DEFAULT_KINDS = (DEFAULT_KIND.name,)
# The name and UID labels of every kind's pods, each pair once (the capacity tracker
# counts pods by them, besides their controller owner reference).
POD_OWNER_LABELS: tuple[PodOwnerLabels, ...] = tuple(
    dict.fromkeys(pair for kind in DEDICATED.values() for pair in kind.pod_owner_labels)
)


def dedicated_by_kind(kind: object, api_version: object = None) -> WorkloadKind | None:
    """The dedicated adapter of an object's ``kind`` (and ``apiVersion``, when it has one)."""
    for adapter in DEDICATED.values():
        if adapter.ref.kind == kind and api_version in (None, "", adapter.ref.api_version):
            return adapter
    return None


class KindError(ValueError):
    """A kind name that cannot be used; the message says how to write it."""


def parse_kind_name(text: str) -> tuple[str, str, str]:
    """``Kind.version.group`` as (kind, version, group); the group may hold dots."""
    parts = text.strip().split(".", 2)
    if len(parts) < 2 or not all(parts[:2]) or not parts[0][:1].isupper():
        raise KindError(
            f"--kind {text!r}: write Kind.version.group, e.g. Job.v1.batch or "
            "JobSet.v1alpha2.jobset.x-k8s.io (the kind capitalised, as in the CRD)"
        )
    return parts[0], parts[1], parts[2] if len(parts) == 3 else ""


def default_plural(kind: str) -> str:
    """The plural the API uses by convention, when discovery cannot be asked."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def kinds_from_names(
    names: Iterable[str],
    *,
    finished_conditions: Sequence[str] = DEFAULT_FINISHED_CONDITIONS,
    plurals: dict[str, str] | None = None,
    fields: Mapping[str, tuple[str, ...]] | None = None,
) -> list[WorkloadKind]:
    """Adapters for these names, in order, each once: dedicated where one exists.

    ``plurals`` maps a name to the plural its apiserver serves it under
    (from discovery); a name missing from it uses the conventional plural.
    ``fields`` maps a kind without an adapter to where it keeps managedBy
    (default spec.managedBy); an adapter knows its own.
    """
    chosen: dict[str, WorkloadKind] = {}
    for text in names:
        kind, version, group = parse_kind_name(text)
        ref = Resource(group, version, (plurals or {}).get(text) or default_plural(kind), kind)
        if ref.name in chosen:
            continue
        chosen[ref.name] = DEDICATED.get(ref.name) or GenericKind(
            ref, finished_conditions, (fields or {}).get(ref.name, SPEC_MANAGED_BY)
        )
    if not chosen:
        raise KindError("at least one --kind is needed")
    return list(chosen.values())
