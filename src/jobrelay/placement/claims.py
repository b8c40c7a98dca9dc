"""Which PersistentVolumeClaims a worker has, as placement sees them (pure).

A workload whose pods mount a claim by name runs where that claim's data is: only
on a worker holding a Bound claim of that name in the workload's namespace (the
seeds' "route work to the region where the data is"). The worker's claims come
from its claim informer (``fleet/workers/claim_feed.py``); a worker whose claims
cannot be read is never trusted to hold the data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobrelay.placement.not_known import NotKnownYet

__all__ = ["BOUND", "WorkerClaims", "claim_refusal"]

BOUND = "Bound"


@dataclass(frozen=True, slots=True)
class WorkerClaims:
    """A worker's PersistentVolumeClaims: by namespace, each claim's ``status.phase``
    ("" while it has none)."""

    # Its claim informer has listed: what ``phases`` lacks is really absent.
    synced: bool = False
    phases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Why its claims cannot be read (its credential may not list them), if so.
    unreadable: str | None = None

    def refusal(self, namespace: str, claims: Iterable[str]) -> str | NotKnownYet | None:
        return claim_refusal(namespace, claims, self)


def claim_refusal(
    namespace: str, claims: Iterable[str], worker: WorkerClaims
) -> str | NotKnownYet | None:
    """Why the data of ``claims`` (in ``namespace``) is not on this worker; None when every
    one of them is there and Bound. The first claim (by name) that is not says why
    (:class:`NotKnownYet` while its claims have not listed)."""
    wanted = sorted(set(claims))
    if not wanted:
        return None
    if worker.unreadable is not None:
        return (
            f"its PersistentVolumeClaims cannot be read ({worker.unreadable}): jobrelay "
            f"cannot tell whether PersistentVolumeClaim {wanted[0]} in {namespace} is there"
        )
    if not worker.synced:
        return NotKnownYet.CLAIMS
    there = worker.phases.get(namespace) or {}
    for name in wanted:
        phase = there.get(name)
        if phase is None:
            return f"no PersistentVolumeClaim {name} in {namespace}"
        if phase != BOUND:
            return f"PersistentVolumeClaim {name} in {namespace} is {phase or 'Pending'}"
    return None
