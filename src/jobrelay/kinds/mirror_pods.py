"""Which pods on a worker are a mirror's, and whom any pod speaks for (pure).

By UID, never by name alone: a pod is a mirror's when it names (as its controller,
or in its kind's UID label) the mirror's UID or the UID of an object the mirror
controls there (its kind's :meth:`~jobrelay.kinds.base.WorkloadKind.owner_hops`,
read on the worker by whoever lists the pods). The aggregated API lists a mirror's
pods so (:func:`mirror_pod_uids`, :func:`pods_of_mirror`); the capacity tracker and
the worker Event relay count every pod under each (name, UID) it names
(:func:`pod_owners`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import POD_OWNER_LABELS
from jobrelay.kinds.pod_ownership import OwnerHop, controller_refs, hop_uids, label_owners
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta

__all__ = ["OWNER_LABELS", "mirror_pod_uids", "pod_owners", "pods_of_mirror"]

# Every owner label of every kind's pods (what a slim pod keeps of its labels).
OWNER_LABELS = tuple(
    dict.fromkeys(key for pair in POD_OWNER_LABELS for key in (*pair.names, *pair.uids))
)


def pod_owners(pod: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """The (name, UID) of each object a pod (slim or full) speaks for: its controller's
    owner reference, and each kind's name and UID labels together (a JobSet's pods are
    owned by its child Jobs and carry the JobSet's UID label). A name alone names
    nothing: that is the UID's job."""
    metadata = Meta(pod).raw
    found = set(label_owners(metadata.get("labels"), POD_OWNER_LABELS))
    found.update(controller_refs(pod))
    return frozenset(found)


def mirror_pod_uids(
    kind: WorkloadKind,
    mirror: JsonObj,
    hops: Iterable[tuple[OwnerHop, Mapping[str, Any] | None]] = (),
) -> frozenset[str]:
    """The UIDs a pod of ``mirror`` may name: the mirror's, and those of the hops found on
    its worker (``hops``: each of ``kind.owner_hops(mirror)`` with what was read, None
    when not there) that the mirror controls."""
    wanted = set(kind.owner_hops(mirror))
    return hop_uids(Meta(mirror).uid, ((hop, obj) for hop, obj in hops if hop in wanted))


def pods_of_mirror(
    kind: WorkloadKind, uids: frozenset[str], pods: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The pods among ``pods`` that are the mirror's (``uids``: :func:`mirror_pod_uids`),
    each once (several selectors may list one pod)."""
    seen: set[str] = set()
    mine = []
    for pod in pods:
        key = Meta(pod).uid or Meta(pod).key
        if key not in seen and kind.owns(pod, uids):
            seen.add(key)
            mine.append(pod)
    return mine
