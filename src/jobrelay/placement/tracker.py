"""One worker's live capacity, kept from the informer events of its Nodes and Pods.

The informers store the slim objects of :mod:`.slim_objects` (only
what placement reads, strings interned and equal requests shared), and hand every
change to a :class:`CapacityTracker`, which adjusts only the sums of the node the pod
is bound to. :meth:`CapacityTracker.capacity` builds the immutable
:class:`~jobrelay.placement.capacity.WorkerCapacity` a decision reads, lazily, and
returns the same object until something changes, rebuilding only the nodes that did.

Pods are also counted per owner, named *and identified by its UID*
(:func:`~jobrelay.kinds.mirror_pods.pod_owners`: the controller's owner reference, or
the name and UID labels its kind's operator puts on every pod, as the kinds' adapters
name them), so the caller can ask whether a mirror's pods have started or sit
unschedulable (:meth:`CapacityTracker.pods_of`). A pod that only carries a workload's
name in its labels speaks for nobody: a worker's namesake pods, or a tenant's there,
never move or hold a workload.

Some kinds' pods are made by an object their operator makes from the mirror (a
RayJob's RayCluster and submitter Job, an MPIJob's launcher Job, a TrainJob's JobSet:
each kind's ``owner_hops``). The worker's hop feed hands the tracker those objects,
slim (:func:`~jobrelay.placement.slim_objects.slim_hop`: identity and controller), and the pods of each count as its
controller's too, one hop deep, and only while the hop's controller reference names
the mirror's UID: a namesake someone else made there speaks for nobody.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from jobrelay.kinds.mirror_pods import pod_owners
from jobrelay.kinds.pod_ownership import controller_refs
from jobrelay.placement.capacity import Node, WorkerCapacity, node_of
from jobrelay.placement.slim_objects import SLIM_OWNERS, UNUSABLE_QUANTITY, WORKER_FAULT
from jobrelay.vocabulary.meta import Meta

__all__ = ["CapacityTracker", "OwnedPods", "OwnerKey"]

_STARTED = frozenset({"Running", "Succeeded", "Failed"})
# Whom pods are counted for: (namespace, name, UID).
OwnerKey = tuple[str, str, str]


def _tie_of(hop: Mapping[str, Any]) -> tuple[OwnerKey, OwnerKey] | None:
    """A slim hop as (the hop, its controller), each as pods' owners are keyed."""
    meta = Meta(hop)
    controller = controller_refs(hop)
    if not controller or not meta.name or not meta.uid:
        return None
    name, uid = controller[0]
    return (meta.namespace, meta.name, meta.uid), (meta.namespace, name, uid)


# -- the tracker ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnedPods:
    """The pods of one workload on this worker (finished ones are not watched: the
    mirror's own status counts those)."""

    total: int = 0
    bound: int = 0
    # Whether any pod was bound to a node or ran.
    started: bool = False
    # The earliest time (RFC 3339) one of its unbound pods was found unschedulable.
    unschedulable_since: str | None = None
    # Why one of its pods cannot run here for a worker-side cause (kinds/pod_faults.py).
    worker_fault: str | None = None


@dataclass
class _Owner:
    total: int = 0
    bound: int = 0
    started: int = 0
    # Unbound unschedulable pods: name -> since. Usually empty or small.
    unschedulable: dict[str, str] | None = None
    # Pods that cannot run here for a worker-side cause: name -> why. Usually None.
    faults: dict[str, str] | None = None


def _owners_of(pod: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    namespace = pod["metadata"].get("namespace", "")
    owners = pod.get(SLIM_OWNERS)
    if owners is None:  # not slimmed here
        owners = sorted(pod_owners(pod))
    return [(namespace, name, uid) for name, uid in owners]


# How many owner moves a tracker keeps for reservation passes (a pass a second older
# than a burst of this many binds looks at every reservation).
REBOUND_KEPT = 4096


class CapacityTracker:
    """Nodes and the sums of the requests of the pods bound to each, kept incrementally.

    Feed it the slim objects the informers cache: :meth:`set_node` / :meth:`delete_node`,
    :meth:`set_pod` / :meth:`delete_pod` and :meth:`set_hop` / :meth:`delete_hop`, by
    the informer's key. Each returns whether something placement reads changed. Not
    thread-safe (one event loop).
    """

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}  # by node name, requested left empty
        self._pods: dict[str, Mapping[str, Any]] = {}  # the slim pod as counted, by key
        self._requested: dict[str, dict[str, int]] = {}  # by node name
        self._owners: dict[OwnerKey, _Owner] = {}
        # The hops (by the hop feed's key) as (the hop, its controller); each hop's
        # controller, and each controller's hops.
        self._hops: dict[str, tuple[OwnerKey, OwnerKey]] = {}
        self._controller_of: dict[OwnerKey, OwnerKey] = {}
        self._hops_of: dict[OwnerKey, set[OwnerKey]] = {}
        # The UIDs under which each (namespace, name) owns pods or controls hops: a
        # workload's pods found by its name once its mirror (and so its UID) is gone.
        self._uids_named: dict[tuple[str, str], dict[str, int]] = {}
        self._built: dict[str, Node] = {}  # the nodes of the last capacity(), by name
        self._dirty: set[str] = set()  # node names whose built Node is stale
        self._capacity: WorkerCapacity | None = None
        self._unusable: str | None = None  # the last unusable quantity seen, not yet told
        # Moves whenever which pods are bound, or whose they are, changes: what a
        # reservation pass reads (so pods created, running or finishing unbound never move it).
        self.bindings_version = 0
        # The (namespace, name) of the owners each move concerned, by version: a pass looks
        # again only at their reservations (the last moves only: an older pass looks at all).
        self._rebound: deque[tuple[int, tuple[str, str]]] = deque(maxlen=REBOUND_KEPT)
        self._dropped = False  # whether the oldest moves were let go

    # -- feeding -------------------------------------------------------------------

    def set_node(self, node: Mapping[str, Any]) -> bool:
        """A node added or changed (a slim or full Node object)."""
        try:
            parsed = node_of(dict(node))
        except (ValueError, TypeError, AttributeError) as error:
            # An unusable allocatable: the node is treated as absent.
            self._unusable = f"node {Meta(node).name[:253]}: {str(error)[:300]}"
            return self.delete_node(Meta(node).name)
        if self._nodes.get(parsed.name) == parsed:
            return False
        self._nodes[parsed.name] = parsed
        self._touch(parsed.name)
        return True

    def delete_node(self, name: str) -> bool:
        if self._nodes.pop(name, None) is None:
            return False
        self._touch(name)
        return True

    def set_pod(self, key: str, pod: Mapping[str, Any] | None) -> bool:
        """A pod added or changed (slim, as :func:`~jobrelay.placement.slim_objects.slim_pod` makes it); None: it finished."""
        if pod is None:
            return self.delete_pod(key)
        old = self._pods.get(key)
        if old is not None and _counted(old) == _counted(pod):
            self._pods[key] = pod
            return False
        if pod.get(UNUSABLE_QUANTITY):
            self._unusable = f"pod {key[:300]}: {pod[UNUSABLE_QUANTITY]}"
        if old is not None:
            self._count(key, old, -1)
        self._pods[key] = pod
        self._count(key, pod, +1)
        if _binding(old) != _binding(pod) if old is not None else pod.get("nodeName"):
            self._rebind((*(_owners_of(old) if old is not None else ()), *_owners_of(pod)))
        return True

    def delete_pod(self, key: str) -> bool:
        # What was counted is undone, whatever the deleted object's final state says.
        old = self._pods.pop(key, None)
        if old is None:
            return False
        self._count(key, old, -1)
        if old.get("nodeName"):
            self._rebind(_owners_of(old))
        return True

    def set_hop(self, key: str, hop: Mapping[str, Any] | None) -> bool:
        """An owner hop added or changed (slim, as :func:`slim_hop` makes it; None: it is
        left out), by a key unique across the hop resources: its pods count as its
        controller's too. True when whose pods they are changed."""
        tie = _tie_of(hop) if hop is not None else None
        if tie is None:
            return self.delete_hop(key)
        if self._hops.get(key) == tie:
            return False
        self.delete_hop(key)
        self._rebind(tie)
        hop_owner, controller = tie
        self._hops[key] = tie
        self._controller_of[hop_owner] = controller
        hops = self._hops_of.setdefault(controller, set())
        if not hops:
            self._name(controller, +1)
        hops.add(hop_owner)
        return True

    def delete_hop(self, key: str) -> bool:
        tie = self._hops.pop(key, None)
        if tie is None:
            return False
        self._rebind(tie)
        hop_owner, controller = tie
        self._controller_of.pop(hop_owner, None)
        hops = self._hops_of.get(controller)
        if hops is not None:
            hops.discard(hop_owner)
            if not hops:
                del self._hops_of[controller]
                self._name(controller, -1)
        return True

    def rebound_since(self, version: int) -> set[tuple[str, str]] | None:
        """The (namespace, name) of the owners whose pod bindings moved after ``version``
        (None: too long ago to say, so any may have)."""
        if version > self.bindings_version:
            return None  # a version of another tracker (its worker was registered anew)
        names: set[tuple[str, str]] = set()
        for moved, name in reversed(self._rebound):
            if moved <= version:
                return names
            names.add(name)
        return None if self._dropped else names  # all kept are newer: dropped ones may be

    def _rebind(self, owners: Iterable[OwnerKey]) -> None:
        """Pods of ``owners`` were bound, unbound or changed hands: so did their hops'
        controllers' (a JobSet's through its Jobs)."""
        self.bindings_version += 1
        for owner in owners:
            for namespace, name, _uid in (owner, self._controller_of.get(owner, owner)):
                if len(self._rebound) == self._rebound.maxlen:
                    self._dropped = True
                self._rebound.append((self.bindings_version, (namespace, name)))

    def take_unusable(self) -> str | None:
        """The last node or pod whose quantities were unusable since the last call, and why."""
        unusable, self._unusable = self._unusable, None
        return unusable

    # -- reading -----------------------------------------------------------------------

    def capacity(self) -> WorkerCapacity:
        """The nodes and what is requested on each, as of the last event; the same object
        while nothing changed."""
        if self._capacity is None:
            for name in self._dirty:
                node = self._nodes.get(name)
                if node is None:
                    self._built.pop(name, None)
                else:
                    self._built[name] = replace(node, requested=dict(self._requested.get(name, {})))
            self._dirty.clear()
            self._capacity = WorkerCapacity(tuple(self._built.values()))
        return self._capacity

    def pods_of(self, namespace: str, owner_name: str, owner_uid: str) -> OwnedPods:
        """The pods of the workload ``namespace/owner_name`` whose UID is ``owner_uid``
        (see :func:`~jobrelay.kinds.mirror_pods.pod_owners`), and those of the hops it
        controls (:meth:`set_hop`)."""
        key = (namespace, owner_name, owner_uid)
        owners = [
            owner
            for owner_key in (key, *self._hops_of.get(key, ()))
            if (owner := self._owners.get(owner_key)) is not None
        ]
        if not owners:
            return OwnedPods()
        since = min(
            (s for owner in owners if owner.unschedulable for s in owner.unschedulable.values()),
            default=None,
        )
        fault = min(
            (f for owner in owners if owner.faults for f in owner.faults.values()), default=None
        )
        return OwnedPods(
            sum(owner.total for owner in owners),
            sum(owner.bound for owner in owners),
            any(owner.started > 0 for owner in owners),
            since,
            fault,
        )

    def holds_pods_named(self, namespace: str, name: str) -> bool:
        """Whether unfinished pods of a workload ``namespace/name`` (under any UID, its
        hops' included) are counted here: the room a run of it holds, gone or not."""
        uids = self._uids_named.get((namespace, name))
        return bool(uids) and any(
            self.pods_of(namespace, name, uid).total > 0 for uid in list(uids or ())
        )

    def _name(self, key: OwnerKey, sign: int) -> None:
        """Counts (sign +1) or uncounts an owner or a hops' controller under its name."""
        namespace, name, uid = key
        uids = self._uids_named.setdefault((namespace, name), {})
        left = uids.get(uid, 0) + sign
        if left > 0:
            uids[uid] = left
        else:
            uids.pop(uid, None)
            if not uids:
                del self._uids_named[(namespace, name)]

    def unschedulable(self) -> list[OwnerKey]:
        """The (namespace, owner name, owner UID) of every workload with a pod no node
        will take, or one that cannot run here for a worker-side cause (a hop's pod: the
        hop's controller), each once."""
        found = (
            self._controller_of.get(key, key)
            for key, owner in self._owners.items()
            if owner.unschedulable or owner.faults
        )
        return list(dict.fromkeys(found))

    def requested(self) -> dict[str, dict[str, int]]:
        """A copy of the sums per node name (nodes not listed yet included)."""
        return {name: dict(sums) for name, sums in self._requested.items()}

    def __len__(self) -> int:
        """How many pods it counts."""
        return len(self._pods)

    # -- internals ------------------------------------------------------------------

    def _touch(self, node_name: str) -> None:
        self._dirty.add(node_name)
        self._capacity = None

    def _count(self, key: str, pod: Mapping[str, Any], sign: int) -> None:
        node_name = pod.get("nodeName") or ""
        if node_name:
            sums = self._requested.setdefault(node_name, {})
            for resource, quantity in pod.get("requests") or ():
                left = sums.get(resource, 0) + sign * quantity
                if left:
                    sums[resource] = left
                else:
                    sums.pop(resource, None)
            if not sums:
                del self._requested[node_name]
            if node_name in self._nodes or node_name in self._built:
                self._touch(node_name)
        started = bool(node_name) or pod.get("phase") in _STARTED
        since = pod.get("unschedulableSince")
        fault = pod.get(WORKER_FAULT)
        for owner_key in _owners_of(pod):
            owner = self._owners.get(owner_key)
            if owner is None:
                owner = self._owners[owner_key] = _Owner()
                self._name(owner_key, +1)
            owner.total += sign
            owner.bound += sign if node_name else 0
            owner.started += sign if started else 0
            if since is not None and not node_name:
                if sign > 0:
                    owner.unschedulable = owner.unschedulable or {}
                    owner.unschedulable[key] = since
                elif owner.unschedulable is not None:
                    owner.unschedulable.pop(key, None)
            if fault is not None:
                if sign > 0:
                    owner.faults = owner.faults or {}
                    owner.faults[key] = fault
                elif owner.faults is not None:
                    owner.faults.pop(key, None)
            if owner.total <= 0:
                del self._owners[owner_key]
                self._name(owner_key, -1)


def _binding(pod: Mapping[str, Any]) -> tuple[bool, tuple[OwnerKey, ...]]:
    """Whether a pod is bound, and whose it is: what a reservation reads of it."""
    return bool(pod.get("nodeName")), tuple(_owners_of(pod))


def _counted(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a pod the tracker counts: a change to anything else changes nothing."""
    return (
        pod.get("nodeName") or "",
        pod.get("phase") in _STARTED,
        pod.get("requests"),
        pod.get("unschedulableSince"),
        pod.get(WORKER_FAULT),
        tuple(_owners_of(pod)),
    )
