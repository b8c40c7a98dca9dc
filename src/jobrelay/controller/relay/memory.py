"""The relay's memory: what one reconcile leaves for the next, in one home with one owner.

The decision is pure and the caches lag, so a few things are remembered between
reconciles, in memory only (a restarted controller starts from freshly listed
caches and loses nothing it needs):

- our own creates and deletes until the caches show them (``created``,
  ``deleted``: :class:`~jobrelay.controller.expectations.Expectations`);
- placements until their worker has caught up (``reservations``): they count in
  its load until their mirror is visible, and take room in its capacity until its
  pods are bound;
- what the last decision said of a workload: why it is held unplaced, the move it
  began, since when a passing status step waits to be copied in a batch, whether this
  process told it it was preempted (an Event a restart may have lost: told again);
- each namespace's placement policy (its annotations), as the runner feeds it;
- admission's (``queues``, :class:`QueueMemory`): the last admission plan, the
  workloads being placed (so two reconciles never both take the last of a quota),
  the victims chosen whose mark is not written yet, and each workload as admission
  read it (once per resourceVersion).

The runner makes one; the reconciler reads it to build snapshots and writes what
each plan says (:meth:`RelayMemory.remember`); the executor records its writes in
it. Building a snapshot changes nothing here: what the caches now confirm is
forgotten by an explicit step (:meth:`RelayMemory.forget_confirmed`) the
reconciler runs first.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass

from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.queue_model import Entry, Preempt
from jobrelay.admission.workload_reads import WorkloadRead
from jobrelay.controller.expectations import Expectations
from jobrelay.controller.relay.leaving import Leaving
from jobrelay.controller.relay.own_writes import OwnWrites
from jobrelay.controller.relay.plan import Annotate, Done, Place, Plan, ReadFresh, Retry
from jobrelay.controller.relay.reservations import (
    RESERVATION_MAX_AGE,
    ReservationPass,
    Reservations,
    Reserved,
    WorkerPods,
    without_bound,
)
from jobrelay.controller.relay.snapshot import UnrecordedMirror
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.placement.capacity import Reservation, WorkerCapacity
from jobrelay.placement.workload import (
    Choice,
    Invalid,
    PodGroup,
    Workload,
    read_choice,
    read_workload,
)
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, PREEMPTED_BY_ANNOTATION
from jobrelay.vocabulary.outcome import Lane

__all__ = ["ADMITTING_FOR", "NO_POLICY", "QueueMemory", "RelayMemory"]

# A worker object found under a name a workload needs, not made by jobrelay, is believed
# to be there this long (its owner may delete it): then a copy is tried there again.
FOREIGN_COPY_TTL = 300.0
# A namespace without annotations: any cluster, the default score.
NO_POLICY = Choice()
# How long a workload a reconcile decided to place counts as admitted before its placement
# shows in the cache (a placement is one write: seconds at most); and a victim an
# admission plan chose, before its reconcile has written its mark.
ADMITTING_FOR = 30.0


# The room a preempted workload freed shows free only once its pods are gone from its
# worker's pod cache (after its mirror from the Jobs' cache, which is what puts it back
# in its queue): nobody is preempted while a requeued victim's pods are still counted, so
# the same room is never made twice. At most this long: a worker that stops answering
# never says they went.
SETTLE_AT_MOST = 60.0


@dataclass(slots=True)
class QueueMemory:
    """Admission's soft state (see the module doc). Reconciles write ``admitting``
    (:meth:`admit`, :meth:`not_placed`); the admission runner the rest, after each pass."""

    monotonic: Callable[[], float] = time.monotonic
    # The last admission plan (None: none yet, or no queue and no quota since).
    last: AdmissionPlan | None = None
    # Workloads a reconcile decided to place, their placement not in the caches yet: what
    # they take, and since when.
    admitting: dict[WorkloadKey, Entry] = dataclasses.field(default_factory=dict)
    admitting_since: dict[WorkloadKey, float] = dataclasses.field(default_factory=dict)
    # Victims a plan chose whose reconcile has not marked them yet, since when.
    preempting: dict[WorkloadKey, tuple[float, Preempt]] = dataclasses.field(default_factory=dict)
    # Each workload as admission read it (its version says when to read again), by its
    # kind's name and then ``namespace/name``, as the caches key it: a pass over every
    # cached workload looks each up without making a WorkloadKey for it.
    reads: dict[str, dict[str, WorkloadRead]] = dataclasses.field(default_factory=dict)
    # Victims seen back in their queues (unplaced, marked), since when, and their mark:
    # the room they freed may not show free while their pods are still counted.
    requeued: dict[WorkloadKey, tuple[float, str]] = dataclasses.field(default_factory=dict)

    def settling(
        self, seen: Mapping[WorkloadKey, str], still_held: Callable[[WorkloadKey], bool]
    ) -> frozenset[str]:
        """``seen``: the victims back in their queues now, with their marks; the marks of
        those whose pods are still counted on a worker (``still_held``), for at most
        SETTLE_AT_MOST since they were seen back."""
        now = self.monotonic()
        for key in [key for key in self.requeued if key not in seen]:
            del self.requeued[key]
        for key, mark in seen.items():
            if self.requeued.get(key, (0.0, ""))[1] != mark:
                self.requeued[key] = (now, mark)
        return frozenset(
            mark
            for key, (since, mark) in self.requeued.items()
            if now - since < SETTLE_AT_MOST and still_held(key)
        )

    def read(self, key: WorkloadKey) -> WorkloadRead | None:
        """``key`` as admission last read it (None: not read, or forgotten)."""
        return self.reads.get(key.kind, {}).get(key.key)

    def reads_of(self, kind: str) -> dict[str, WorkloadRead]:
        """The reads of one kind's workloads by ``namespace/name``: the memo itself, kept
        by :meth:`keep`."""
        return self.reads.setdefault(kind, {})

    def keep(self, read: WorkloadRead) -> None:
        """Remembers ``read`` for the next pass."""
        self.reads_of(read.key.kind)[read.key.key] = read

    def admit(self, key: WorkloadKey, entry: Entry) -> None:
        """A reconcile decided to place ``key``: it counts as admitted until it shows."""
        self.admitting[key] = entry
        self.admitting_since[key] = self.monotonic()

    def not_placed(self, key: WorkloadKey) -> None:
        """Its reconcile held it after all (or its placement shows, or it went): it takes
        nothing as one being placed."""
        self.admitting.pop(key, None)
        self.admitting_since.pop(key, None)

    def chose(self, victims: Mapping[WorkloadKey, Preempt]) -> None:
        """A plan chose these victims: told to their reconciles until marked."""
        now = self.monotonic()
        for key, preempt in victims.items():
            self.preempting[key] = (now, preempt)

    def preemption(self, key: WorkloadKey) -> Preempt | None:
        told = self.preempting.get(key)
        return told[1] if told is not None else None

    def expire(self) -> None:
        """Forget those being placed whose placement never showed, and the victims marked
        (the object says it now), gone, or never marked in time."""
        now = self.monotonic()
        for key, since in list(self.admitting_since.items()):
            if now - since > ADMITTING_FOR:
                self.not_placed(key)
        for key, (since, _told) in list(self.preempting.items()):
            read = self.read(key)
            if now - since > ADMITTING_FOR or read is None or read.preempted_by or not read.placed:
                del self.preempting[key]

    def forget(self, key: WorkloadKey) -> None:
        """Its management object is gone."""
        self.reads.get(key.kind, {}).pop(key.key, None)
        self.not_placed(key)


class RelayMemory:
    """The soft state of the relay (see the module doc)."""

    def __init__(
        self,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        requeue: Callable[[WorkloadKey, Lane], None] | None = None,
    ) -> None:
        self.created = Expectations()
        self.deleted = Expectations()
        self.reservations = Reservations(monotonic)
        self.queues = QueueMemory(monotonic)
        # The versions this process's writes produced: their watch events are echoes (those
        # that come before a write's answer wait for it, then ``requeue`` the others).
        self.own_writes = OwnWrites(requeue=requeue)
        self._monotonic = monotonic
        # Workloads waiting unplaced, oldest first, with the signature of why (told to
        # the user again only when it changes); retried as soon as capacity changes.
        self._held: dict[WorkloadKey, str] = {}
        # Moves begun (their mirror is being deleted): from which worker, and why.
        self._leaving: dict[WorkloadKey, Leaving] = {}
        # Workloads whose passing status step waits to be copied in a batch, since when.
        self._batching_since: dict[WorkloadKey, float] = {}
        # Preempted workloads this process marked and told (Warning Preempted) whose run
        # has not ended yet: a restarted controller tells them again as the run ends.
        self._told_preempted: set[WorkloadKey] = set()
        # Held workloads as placement reads them, by key: (resourceVersion, workload).
        self._workloads: dict[WorkloadKey, tuple[str, Workload | None]] = {}
        # Each namespace's placement policy, from its annotations.
        self._policies: dict[str, Choice | Invalid] = {}
        # Per worker: its reservations looked at once per change and second (what each
        # still reserves, which reserve nothing); and its capacity with them laid on,
        # with what it was computed from.
        self._passes: dict[str, ReservationPass] = {}
        self._overlays: dict[
            str, tuple[WorkerCapacity, tuple[Reservation, ...], WorkerCapacity]
        ] = {}
        # Names a copy found held on a worker by an object jobrelay did not make, since
        # when: (worker, namespace, "configmap/settings").
        self._foreign_copies: dict[tuple[str, str, str], float] = {}
        # Mirrors created and not recorded on their object yet: key -> worker -> (run, UID,
        # when). The record is written off the dispatch path (steps/mirror_record.py).
        self._unrecorded: dict[WorkloadKey, dict[str, tuple[int, str, float]]] = {}
        # The resourceVersion each create was answered with, by mirror UID, until its
        # watch event came: that event shows what its creator already knows. And the
        # creates under way, by (worker, key): a mirror's first event then is their echo
        # (the name is taken by what the create makes, or the create fails and its
        # reconcile is retried).
        self._created_versions: dict[str, str] = {}
        self._creating: set[tuple[str, WorkloadKey]] = set()

    # -- mirrors created, their record to come ---------------------------------------------

    def mirror_created(
        self, cluster: str, key: WorkloadKey, run: int, uid: str, version: str = ""
    ) -> None:
        """The create's answer: ``uid`` is run ``run``'s mirror of ``key`` on ``cluster``,
        at resourceVersion ``version``."""
        self._unrecorded.setdefault(key, {})[cluster] = (run, uid, self._monotonic())
        if version:
            self._created_versions[uid] = version

    def create_started(self, cluster: str, key: WorkloadKey) -> None:
        self._creating.add((cluster, key))

    def create_ended(self, cluster: str, key: WorkloadKey) -> None:
        self._creating.discard((cluster, key))

    def is_create_echo(self, cluster: str, key: WorkloadKey, uid: str, version: str) -> bool:
        """Whether a mirror's first watch event on ``cluster`` echoes this process's
        create of it: it came while the create was under way, or it shows just what the
        create was answered (then forgotten: only that one event is)."""
        answered = self._created_versions.pop(uid, None)
        return (cluster, key) in self._creating or (answered is not None and answered == version)

    def unrecorded(self, cluster: str, key: WorkloadKey) -> UnrecordedMirror | None:
        """The mirror of ``key`` this process created on ``cluster``, while unrecorded."""
        found = self._unrecorded.get(key, {}).get(cluster)
        if found is None:
            return None
        run, uid, since = found
        return UnrecordedMirror(run, uid, self._monotonic() - since)

    def has_unrecorded(self, key: WorkloadKey) -> bool:
        return key in self._unrecorded

    def forget_unrecorded(self, key: WorkloadKey, waits: Callable[[int], bool]) -> None:
        """Drop the mirrors of ``key`` no longer waiting for a record: those whose run
        ``waits(run)`` says is recorded, finished or gone."""
        mine = self._unrecorded.get(key)
        if not mine:
            return
        for cluster, (run, uid, _since) in list(mine.items()):
            if not waits(run):
                del mine[cluster]
                self._created_versions.pop(uid, None)
        if not mine:
            del self._unrecorded[key]

    # -- objects on workers that jobrelay did not make ------------------------------------

    def foreign_copy(self, cluster: str, namespace: str, name: str) -> None:
        """A copy of ``name`` (``configmap/settings``) met an object jobrelay did not make."""
        self._foreign_copies[(cluster, namespace, name)] = self._monotonic()

    def foreign_copies(self, cluster: str, namespace: str, names: Iterable[str]) -> tuple[str, ...]:
        """Those of ``names`` known held on ``cluster`` by someone else (for a while)."""
        now = self._monotonic()
        held = []
        for name in names:
            since = self._foreign_copies.get((cluster, namespace, name))
            if since is None:
                continue
            if now - since > FOREIGN_COPY_TTL:
                del self._foreign_copies[(cluster, namespace, name)]
                continue
            held.append(name)
        return tuple(held)

    # -- what decisions said -------------------------------------------------------------

    def remember(self, key: WorkloadKey, plan: Plan) -> None:
        """Keep what ``plan`` says about ``key`` for its next decision."""
        placing = any(isinstance(a, Place) for a in plan.actions)
        if plan.held is not None:
            self._held[key] = plan.held
        elif not isinstance(plan.outcome, (ReadFresh, Retry)) or placing:
            self._held.pop(key, None)
            self._workloads.pop(key, None)
        if plan.batching:
            self._batching_since.setdefault(key, self._monotonic())
        elif not isinstance(plan.outcome, (ReadFresh, Retry)):
            self._batching_since.pop(key, None)
        if plan.leaving is not None:
            self._leaving[key] = plan.leaving
        elif placing or isinstance(plan.outcome, Done):
            self._leaving.pop(key, None)
        for action in plan.actions:
            if isinstance(action, Annotate) and action.annotations.get(PREEMPTED_BY_ANNOTATION):
                self._told_preempted.add(key)
            elif isinstance(action, Annotate) and CLUSTER_ANNOTATION in action.annotations:
                self._told_preempted.discard(key)  # its run ended: back in its queue

    def told_preempted(self, key: WorkloadKey) -> bool:
        """Whether this process marked ``key`` preempted and told it so."""
        return key in self._told_preempted

    def workload_gone(self, key: WorkloadKey) -> None:
        """Its management object is gone."""
        self._told_preempted.discard(key)

    def held_keys(self) -> list[WorkloadKey]:
        """The workloads waiting unplaced, the longest-waiting first."""
        return list(self._held)

    def held(self, key: WorkloadKey) -> str | None:
        """The signature of why ``key`` was last reported held (None: it is not)."""
        return self._held.get(key)

    def leaving(self, key: WorkloadKey) -> Leaving | None:
        """The move ``key`` began: from which worker, and why."""
        return self._leaving.get(key)

    def batching_for(self, key: WorkloadKey) -> float | None:
        """Seconds a passing status step of ``key`` has waited to be copied in a batch."""
        since = self._batching_since.get(key)
        return None if since is None else self._monotonic() - since

    def held_workload(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj) -> Workload | None:
        """The held workload as placement reads it, parsed once per version."""
        version = str(Meta(obj).resource_version)
        cached = self._workloads.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        workload = read_workload(kind, obj)
        parsed = None if isinstance(workload, Invalid) else workload
        self._workloads[key] = (version, parsed)
        return parsed

    # -- namespaces -----------------------------------------------------------------------

    def policy_changed(self, namespace: str, annotations: Mapping[str, str] | None) -> None:
        """A namespace's annotations changed (None: it is gone)."""
        if annotations is None:
            self._policies.pop(namespace, None)
        else:
            self._policies[namespace] = read_choice(annotations)

    def policy(self, namespace: str) -> Choice | Invalid:
        return self._policies.get(namespace, NO_POLICY)

    # -- what the caches confirm ---------------------------------------------------------

    def forget_confirmed(
        self, creates_seen: Iterable[Hashable], workers: Iterable[WorkerPods]
    ) -> None:
        """Forget what the caches now show: the creates in ``creates_seen`` (the worker's
        cache has their mirror), and each worker's reservations it no longer needs
        (:meth:`prune_reservations`)."""
        for seen in creates_seen:
            self.created.observed(seen)
        for worker in workers:
            self.prune_reservations(worker)

    def prune_reservations(self, worker: WorkerPods) -> None:
        """Release the placements on ``worker`` whose pods it has all bound, whose mirror
        finished or went, or that waited longer than the worker could take to make them:
        when its reservations changed, and at least once a second, not every time."""
        looked = self._reservation_pass(worker)
        if not looked.spent:
            return
        for key in looked.spent:
            self.reservations.release(key)
        # What reserved nothing is gone, what is reserved is as it was: the pass stands
        # for the version releasing moved on to.
        kept = {key: look for key, look in looked.looks.items() if look[2] is not None}
        self._passes[worker.name] = ReservationPass(
            (self.reservations.version(worker.name), *looked.stamp[1:]), looked.reserved, (), kept
        )

    def with_reservations(self, worker: WorkerPods, capacity: WorkerCapacity) -> WorkerCapacity:
        """``capacity`` with what jobrelay placed on ``worker`` laid on it: computed again
        when the worker's capacity or its reservations change, and at least once a second
        (pods get bound), not for every snapshot."""
        reserved = self.reserved_on(worker)
        cached = self._overlays.get(worker.name)
        if cached is not None and cached[0] is capacity and cached[1] is reserved:
            return cached[2]
        if (
            cached is not None
            and cached[0] is capacity
            and len(reserved) == len(cached[1]) + 1
            and reserved[:-1] == cached[1]
        ):
            # A placement more, nothing else changed (a burst's common case): laid on top
            # of the last overlay rather than every reservation laid again, which cost a
            # 500-Job burst about a twentieth of the controller's CPU.
            overlaid = cached[2].with_reservation(reserved[-1])
        else:
            overlaid = capacity.with_reservations(reserved)
        self._overlays[worker.name] = (capacity, reserved, overlaid)
        return overlaid

    def reserved_on(self, worker: WorkerPods) -> tuple[Reservation, ...]:
        """What jobrelay placed on ``worker`` beyond the pods it has bound to nodes: each
        placement's pods less those bound, until all are, its mirror finished or went,
        or it has waited for longer than the worker could take to make them. Looked at
        again when the reservations change, and at least once a second."""
        return self._reservation_pass(worker).reserved

    def _reservation_pass(self, worker: WorkerPods) -> ReservationPass:
        """One look at each reservation on ``worker`` (changing nothing), kept until they
        or the worker's pod bindings change, or a second passes: a burst of placements
        looks once per placement, and both the snapshot's capacity and the pruning step
        read the same look."""
        # The bindings' version too: a pod bound since counts in the worker's capacity, so
        # its reservation must not count as well (room would show less than it is).
        stamp = (
            self.reservations.version(worker.name),
            worker.bindings_version,
            int(self._monotonic()),
        )
        looked = self._passes.get(worker.name)
        if looked is not None and looked.stamp == stamp:
            return looked
        # Within the second only what changed is looked at again: a reservation made or
        # seen since, or one whose workload's pods were bound or went since.
        rebound = (
            worker.rebound_since(looked.stamp[1])
            if looked is not None and looked.stamp[2] == stamp[2]
            else None
        )
        reserved: list[Reservation] = []
        spent: list[WorkloadKey] = []
        looks: dict[WorkloadKey, tuple[Reserved, bool, tuple[PodGroup, ...] | None]] = {}
        for key, entry in self.reservations.on(worker.name):
            assert isinstance(key, WorkloadKey)
            known = looked.looks.get(key) if looked is not None and rebound is not None else None
            if (
                known is not None
                and known[0] is entry
                and known[1] == entry.mirror_visible
                and (key.namespace, key.name) not in (rebound or ())
            ):
                left = known[2]
            else:
                left = self._reserving(worker, key, entry)
            looks[key] = (entry, entry.mirror_visible, left)
            if left is None:
                spent.append(key)
            else:
                reserved.append(Reservation(key.key, left))
        looked = ReservationPass(stamp, tuple(reserved), tuple(spent), looks)
        self._passes[worker.name] = looked
        return looked

    def _reserving(
        self, worker: WorkerPods, key: WorkloadKey, entry: Reserved
    ) -> tuple[PodGroup, ...] | None:
        """The pods ``entry`` still reserves on ``worker`` (None: none any more)."""
        if entry.mirror_visible and key not in worker.unfinished:
            return None  # finished, or gone
        if self.reservations.age(entry) > RESERVATION_MAX_AGE:
            return None
        pods = worker.pods_of(key.namespace, key.name)
        left = without_bound(entry.demand, pods.bound if pods is not None else 0)
        return left or None
