"""Which workload a worker-side Event concerns (pure: no I/O).

Read by :mod:`jobrelay.fleet.workerevents_rules` (what to relay, what blocks):

* :func:`slim_event`, :func:`occurrences`, :func:`last_seen` read an Event, whatever
  shape a worker sent it in;
* :func:`target_of` maps a worker Event to the workload it concerns, from the
  worker's mirror caches and its pod cache: a pod speaks for a mirror only when its
  controller owner reference or its owner UID label names that mirror's UID (never by
  its name or a label's name alone: kinds.mirror_pods.pod_owners); an object a kind's
  operator makes from a mirror (a JobSet's Jobs, a RayJob's RayCluster), as the
  kind's adapter names it;
* :func:`speaks_for` then asks the management object itself: only the one whose UID
  the mirror's ``jobrelay.dev/origin-uid`` names hears of it (a worker that lists a
  made-up "mirror" named like another workload reaches nobody).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL

__all__ = [
    "WORKER_EVENT_FIELD_SELECTOR",
    "MirrorLookup",
    "PodOwners",
    "Target",
    "last_seen",
    "occurrences",
    "slim_event",
    "speaks_for",
    "target_of",
]

# What the worker's Event informer asks for: Warnings only (see workerevents_rules.py).
WORKER_EVENT_FIELD_SELECTOR = "type=Warning"

_POD = ("", "Pod")

# Looks up a cached mirror: (kind name, "namespace/name") -> the slim mirror or None.
MirrorLookup = Callable[[tuple[str, str]], Mapping[str, Any] | None]
# A pod by namespace and name: its UID and the (name, UID) of each owner it speaks for
# (kinds.mirror_pods.pod_owners), or None when the pod is not known.
PodOwners = Callable[[str, str], tuple[str, frozenset[tuple[str, str]]] | None]


# -- reading Events ------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a worker may send anything."""
    return value if isinstance(value, Mapping) else {}


def slim_event(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """An Event with only what the relay reads; None for one about a cluster-scoped object
    (Nodes: no mirror is one), or one that is not shaped like an Event."""
    involved = _mapping(obj.get("involvedObject"))
    if not isinstance(involved.get("namespace"), str) or not isinstance(involved.get("name"), str):
        return None
    if not involved["namespace"] or not involved["name"]:
        return None
    metadata = _mapping(obj.get("metadata"))
    slim: dict[str, Any] = {
        "metadata": {
            k: metadata[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in metadata
        },
        "involvedObject": {
            k: involved[k]
            for k in ("apiVersion", "kind", "name", "namespace", "uid")
            if k in involved
        },
    }
    for key in (
        "type",
        "reason",
        "message",
        "count",
        "firstTimestamp",
        "lastTimestamp",
        "eventTime",
    ):
        if obj.get(key) is not None:
            slim[key] = obj[key]
    series = obj.get("series")
    if isinstance(series, Mapping):
        slim["series"] = {k: series[k] for k in ("count", "lastObservedTime") if k in series}
    return slim


def occurrences(event: Mapping[str, Any]) -> int:
    """How many times it happened: the core/v1 ``count``, or an events.k8s.io series'."""
    series = _mapping(event.get("series"))
    for value in (series.get("count"), event.get("count")):
        if isinstance(value, int) and value > 0:
            return value
    return 1


def _moment(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def last_seen(event: Mapping[str, Any]) -> datetime.datetime | None:
    """When it last happened, by the worker's clock: ``lastTimestamp`` (core/v1
    recorders), ``series.lastObservedTime`` or ``eventTime`` (events.k8s.io recorders,
    e.g. the scheduler), else when the Event was stored."""
    series = _mapping(event.get("series"))
    candidates = (
        event.get("lastTimestamp"),
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        Meta(event).creation_timestamp,
    )
    moments = [m for m in map(_moment, candidates) if m is not None]
    return max(moments) if moments else None


# -- which workload it concerns ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """The management workload a worker Event concerns, through which of its objects."""

    key: WorkloadKey
    mirror_uid: str
    mirror_created: datetime.datetime | None
    # "" for the mirror itself, else what it is about: "pod NAME", "job NAME".
    subject: str = ""
    # Whether a FailedCreate on it means the mirror's pods cannot be made (the mirror
    # itself, or an object its operator made from it): not so for a pod's own Events.
    makes_pods: bool = True
    # The management object's UID the mirror names (its jobrelay.dev/origin-uid).
    origin_uid: str = ""


def speaks_for(target: Target, management: Mapping[str, Any] | None) -> bool:
    """Whether the management object ``management`` (as cached under ``target.key``) is
    the one the mirror was made for: its UID is the mirror's origin-uid. Not so for a
    namesake, a recreated object, or a "mirror" a worker made up."""
    if management is None or not target.origin_uid:
        return False
    return Meta(management).uid == target.origin_uid


def _target(
    kind_name: str, key: str, found: Mapping[str, Any], subject: str = "", makes_pods: bool = True
) -> Target:
    meta = Meta(found)
    return Target(
        WorkloadKey(kind_name, key),
        meta.uid,
        _moment(meta.creation_timestamp),
        subject,
        makes_pods,
        meta.label(ORIGIN_UID_LABEL) or "",
    )


def _group(api_version: Any) -> str:
    text = str(api_version or "")
    return text.partition("/")[0] if "/" in text else ""


def _made_target(
    kinds: Mapping[str, WorkloadKind],
    mirror: MirrorLookup,
    namespace: str,
    made: tuple[str, str],
    name: str,
) -> Target | None:
    """The mirror an object of ``made`` (API group, kind) named ``name`` was made from, as
    the kinds' operators name what they make (longest name first)."""
    candidates = sorted(
        {(candidate, kind_name) for kind_name, kind in kinds.items()
         for candidate in kind.made_for(made, name)},
        key=lambda found: (-len(found[0]), found[1]),
    )  # fmt: skip
    for candidate, kind_name in candidates:
        key = f"{namespace}/{candidate}"
        found = mirror((kind_name, key))
        if found is not None:
            return _target(kind_name, key, found, f"{made[1].lower()} {name}", makes_pods=True)
    return None


def _owning_mirror(
    kinds: Mapping[str, WorkloadKind],
    mirror: MirrorLookup,
    namespace: str,
    owners: frozenset[tuple[str, str]],
    subject: str,
) -> Target | None:
    """The mirror one of ``owners`` (name, UID) is: same name *and* same UID."""
    for name, uid in sorted(owners):
        key = f"{namespace}/{name}"
        for kind_name in kinds:
            found = mirror((kind_name, key))
            if found is not None and uid and Meta(found).uid == uid:
                return _target(kind_name, key, found, subject, makes_pods=False)
    return None


def target_of(
    event: Mapping[str, Any],
    kinds: Mapping[str, WorkloadKind],
    mirror: MirrorLookup,
    pod_owners: PodOwners,
) -> Target | None:
    """The workload ``event`` concerns (``kinds``: the configured kinds by name), or None.

    About a mirror: its kind and name, and its UID when the Event names one (an
    Event about an earlier namesake is not this mirror's). About a Pod: the mirror
    whose UID owns it (``pod_owners``: kinds.mirror_pods.pod_owners); an unknown pod,
    or one owned by nothing of ours, concerns nobody. About another object: the
    mirror a kind's operator made it from (``made_for``: a JobSet's Jobs, a RayJob's
    RayCluster). Whom it may reach is :func:`speaks_for`'s call.
    """
    involved = _mapping(event.get("involvedObject"))
    namespace, name = str(involved.get("namespace") or ""), str(involved.get("name") or "")
    if not namespace or not name:
        return None
    what = (_group(involved.get("apiVersion")), str(involved.get("kind") or ""))
    if what == _POD:
        pod = pod_owners(namespace, name)
        if pod is None:
            return None
        pod_uid, owners = pod
        involved_uid = str(involved.get("uid") or "")
        if involved_uid and pod_uid and involved_uid != pod_uid:
            return None  # about an earlier pod of that name
        return _owning_mirror(kinds, mirror, namespace, owners, f"pod {name}")
    uid = str(involved.get("uid") or "")
    for kind_name, kind in kinds.items():
        if (kind.ref.group, kind.ref.kind) != what:
            continue
        found = mirror((kind_name, f"{namespace}/{name}"))
        if found is None:
            continue
        meta = Meta(found)
        if uid and meta.uid and uid != meta.uid:
            return None
        return _target(kind_name, f"{namespace}/{name}", found)
    return _made_target(kinds, mirror, namespace, what, name)
