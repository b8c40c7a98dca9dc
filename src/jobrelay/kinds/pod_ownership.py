"""What ties a pod on a worker to the object that made it: owner references and the UID
labels an operator writes, read by UID and never by name alone (pure).

A worker's namesake of a workload is someone else's, and so are its pods: a pod
belongs to a mirror only when it names, as its controller or in one of its kind's
UID labels, the mirror's UID or the UID of an object the mirror controls there
(:class:`OwnerHop`: KubeRay's RayCluster of a RayJob, a submitter or launcher Job,
Trainer's JobSet). The adapters say which labels and which hops their kind has
(:class:`~jobrelay.kinds.base.WorkloadKind`); this module reads them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "OwnerHop",
    "PodOwnerLabels",
    "controlled_by",
    "controller_refs",
    "hop_uids",
    "label_owners",
    "name_prefixes",
    "names_a_uid",
]


class PodOwnerLabels(NamedTuple):
    """The labels an operator writes on each pod it makes: the owner's name (``names``)
    and its UID (``uids``), each newest spelling first. Only the two together name an
    owner: a name alone is the UID's job."""

    names: tuple[str, ...]
    uids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OwnerHop:
    """An object a kind's operator makes on the worker, named from the mirror, that makes
    some of the mirror's pods itself. It speaks for the mirror only while the mirror is
    its controller (by UID): a namesake there is someone else's."""

    ref: Resource
    name: str


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def controller_refs(obj: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The (name, UID) of each controller owner reference of ``obj`` that names both (a
    worker may send anything there)."""
    return [
        (name, uid)
        for ref in Meta(obj).owner_references
        if ref.get("controller") is True
        and (name := _text(ref.get("name")))
        and (uid := _text(ref.get("uid")))
    ]


def controlled_by(obj: Mapping[str, Any] | None, uid: str) -> bool:
    """Whether ``obj``'s controller owner reference names ``uid``."""
    return bool(uid) and any(owner_uid == uid for _, owner_uid in controller_refs(obj))


def label_owners(labels: Any, pairs: Iterable[PodOwnerLabels]) -> frozenset[tuple[str, str]]:
    """The (name, UID) each of ``pairs`` finds in ``labels``, where both are texts."""
    if not isinstance(labels, Mapping):
        return frozenset()
    found = set()
    for pair in pairs:
        name = next((v for k in pair.names if (v := _text(labels.get(k)))), "")
        uid = next((v for k in pair.uids if (v := _text(labels.get(k)))), "")
        if name and uid:
            found.add((name, uid))
    return frozenset(found)


def names_a_uid(
    pod: Mapping[str, Any], uids: Collection[str], uid_labels: Iterable[str] = ()
) -> bool:
    """Whether ``pod`` names one of ``uids``: as its controller, or in one of ``uid_labels``."""
    if not uids:
        return False
    if any(uid in uids for _, uid in controller_refs(pod)):
        return True
    labels = Meta(pod).labels
    return any(_text(labels.get(key)) in uids for key in uid_labels if labels.get(key))


def hop_uids(
    mirror_uid: str, found: Iterable[tuple[OwnerHop, Mapping[str, Any] | None]]
) -> frozenset[str]:
    """The UIDs that speak for the mirror ``mirror_uid``: its own, and each hop's found on
    the worker (None: not there) whose controller is the mirror."""
    if not mirror_uid:
        return frozenset()
    uids = {mirror_uid}
    for _, obj in found:
        uid = Meta(obj).uid
        if obj is not None and uid and controlled_by(obj, mirror_uid):
            uids.add(uid)
    return frozenset(uids)


def name_prefixes(name: str) -> tuple[str, ...]:
    """``a-b-c`` -> ``a-b``, ``a``: the names an object called ``name`` may be made for
    (a JobSet's Jobs are ``<jobset>-<replicated job>-<index>``, KubeRay's RayCluster of
    a RayJob ``<rayjob>-<random>``), longest first."""
    found = []
    while "-" in name:
        name = name.rpartition("-")[0]
        if name:
            found.append(name)
    return tuple(found)
