"""The relay's memory: reservations, what decisions said, what the caches confirm.

A snapshot only reads it; :meth:`RelayMemory.forget_confirmed` is the one step
that lets go of what the caches now show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import JOB, NAMESPACE, job

from jobrelay.controller.relay.leaving import Leaving
from jobrelay.controller.relay.memory import NO_POLICY, RelayMemory
from jobrelay.controller.relay.plan import (
    Annotate,
    Done,
    Place,
    Plan,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
)
from jobrelay.controller.relay.reservations import RESERVATION_MAX_AGE, Reservations
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.capacity import Node, WorkerCapacity
from jobrelay.placement.tracker import OwnedPods
from jobrelay.placement.workload import Invalid, PodGroup
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, PREEMPTED_BY_ANNOTATION

KEY = WorkloadKey(JOB.name, f"{NAMESPACE}/train")
OTHER = WorkloadKey(JOB.name, f"{NAMESPACE}/other")
DEMAND = (PodGroup("main", 2, {"cpu": 1000}),)


@dataclass
class Worker:
    """What the memory reads of a worker."""

    name: str
    unfinished: set[WorkloadKey] = field(default_factory=set)
    pods: dict[tuple[str, str], OwnedPods] = field(default_factory=dict)
    bindings_version: int = 0
    # The moves of bindings as (version, (namespace, name)); None: never says which.
    rebound: list[tuple[int, tuple[str, str]]] | None = None
    looked_up: list[tuple[str, str]] = field(default_factory=list)

    def pods_of(self, namespace: str, name: str) -> OwnedPods | None:
        self.looked_up.append((namespace, name))
        return self.pods.get((namespace, name))

    def rebound_since(self, version: int) -> set[tuple[str, str]] | None:
        if self.rebound is None:
            return None
        return {name for moved, name in self.rebound if moved > version}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- what decisions said ---------------------------------------------------------------


def test_a_held_workload_is_remembered_until_a_plan_places_it_or_ends() -> None:
    memory = RelayMemory()
    memory.remember(KEY, Plan((), RequeueAfter(15.0), held="NotPlaced|w1"))
    memory.remember(OTHER, Plan((), RequeueAfter(15.0), held="NeverFits|"))
    assert memory.held_keys() == [KEY, OTHER] and memory.held(KEY) == "NotPlaced|w1"
    # A retry or a fresh read says nothing new about why it is held.
    memory.remember(KEY, Plan((), Retry("conflict")))
    memory.remember(KEY, Plan((), ReadFresh(obj=True)))
    assert memory.held(KEY) == "NotPlaced|w1"
    # A retry that placed it did.
    memory.remember(KEY, Plan((Place("w1", "10"),), Retry("conflict")))
    assert memory.held(KEY) is None
    memory.remember(OTHER, Plan((), Done()))
    assert memory.held_keys() == []


def test_a_move_is_remembered_until_placed_elsewhere_or_done() -> None:
    memory = RelayMemory()
    memory.remember(KEY, Plan((), Retry("waiting"), leaving=Leaving("w1", "draining")))
    memory.remember(KEY, Plan((), Retry("still waiting")))
    assert memory.leaving(KEY) == Leaving("w1", "draining")
    memory.remember(KEY, Plan((Place("w2", "11"),), Done()))
    assert memory.leaving(KEY) is None
    memory.remember(KEY, Plan((), Retry("waiting"), leaving=Leaving("w2", "lost")))
    memory.remember(KEY, Plan((), Done()))
    assert memory.leaving(KEY) is None


def test_a_preemption_told_here_is_remembered_until_its_run_ends_or_it_goes() -> None:
    memory = RelayMemory()
    mark = Annotate({PREEMPTED_BY_ANNOTATION: "Job team-b/urgent"})
    memory.remember(KEY, Plan((mark, RecordEvent("Warning", "Preempted", "by")), Done()))
    memory.remember(OTHER, Plan((mark,), Done()))
    assert memory.told_preempted(KEY) and memory.told_preempted(OTHER)
    memory.remember(KEY, Plan((), Retry("waiting for its pods")))
    assert memory.told_preempted(KEY)
    memory.remember(KEY, Plan((Annotate({CLUSTER_ANNOTATION: None}),), Done()))
    memory.workload_gone(OTHER)
    assert not memory.told_preempted(KEY) and not memory.told_preempted(OTHER)


def test_a_passing_status_step_batches_from_the_first_plan_that_let_it_wait() -> None:
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    assert memory.batching_for(KEY) is None
    memory.remember(KEY, Plan((), RequeueAfter(1.0), batching=True))
    clock.now += 0.5
    memory.remember(KEY, Plan((), RequeueAfter(0.6), batching=True))
    memory.remember(KEY, Plan((), Retry("conflict")))  # says nothing of the batch
    assert memory.batching_for(KEY) == 0.5
    memory.remember(KEY, Plan((), Done()))
    assert memory.batching_for(KEY) is None


def test_namespace_policies() -> None:
    memory = RelayMemory()
    assert memory.policy("team-a") is NO_POLICY
    memory.policy_changed("team-a", {"jobrelay.dev/clusters": "w2"})
    assert memory.policy("team-a").clusters == ("w2",)  # type: ignore[union-attr]
    memory.policy_changed("team-b", {"jobrelay.dev/clusters": ""})
    assert isinstance(memory.policy("team-b"), Invalid)
    memory.policy_changed("team-b", None)
    assert memory.policy("team-b") is NO_POLICY


def test_a_held_workload_is_parsed_once_per_version() -> None:
    memory = RelayMemory()
    obj = job()
    first = memory.held_workload(KEY, JOB, obj)
    assert first is not None
    assert memory.held_workload(KEY, JOB, obj) is first
    obj["metadata"]["resourceVersion"] = "11"
    assert memory.held_workload(KEY, JOB, obj) is not first


# -- what the caches confirm -------------------------------------------------------------


def test_forgetting_what_the_caches_confirm_is_a_step_of_its_own() -> None:
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    worker = Worker("w1", unfinished={KEY})
    memory.created.expect(("w1", KEY, "uid-1"))
    memory.reservations.reserve("w1", KEY, DEMAND)
    memory.reservations.mirror_visible(KEY)
    worker.pods[(NAMESPACE, "train")] = OwnedPods(total=2, bound=2, started=True)
    # Reading changes nothing: all its pods are bound, so it reserves nothing now ...
    assert memory.reserved_on(worker) == ()
    assert [k for k, _ in memory.reservations.on("w1")] == [KEY]
    assert memory.created.pending(("w1", KEY, "uid-1"))
    # ... and the step lets go of both.
    memory.forget_confirmed([("w1", KEY, "uid-1")], [worker])
    assert memory.reservations.on("w1") == []
    assert not memory.created.pending(("w1", KEY, "uid-1"))


def test_reservations_are_pruned_when_they_change_or_a_second_passes() -> None:
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    worker = Worker("w1", unfinished={KEY})
    memory.reservations.reserve("w1", KEY, DEMAND)
    memory.reservations.mirror_visible(KEY)
    memory.prune_reservations(worker)
    assert memory.reserved_on(worker) != ()
    worker.unfinished.clear()  # finished: its room is the worker's again
    memory.prune_reservations(worker)  # within the same second: not looked at again
    assert [k for k, _ in memory.reservations.on("w1")] == [KEY]
    assert memory.reserved_on(worker) != ()  # the snapshot reads the same look
    clock.now += 1.0
    assert memory.reserved_on(worker) == ()  # a second later: looked at again
    assert [k for k, _ in memory.reservations.on("w1")] == [KEY]  # reading changes nothing
    memory.prune_reservations(worker)
    assert memory.reservations.on("w1") == []


def test_pruning_keeps_the_look_the_snapshot_reads() -> None:
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    done = WorkloadKey(JOB.name, f"{NAMESPACE}/done")
    worker = Worker("w1", unfinished={KEY})
    memory.reservations.reserve("w1", KEY, DEMAND)
    memory.reservations.reserve("w1", done, DEMAND)
    memory.reservations.mirror_visible(done)  # visible, and not unfinished: it is spent
    reserved = memory.reserved_on(worker)
    assert [r.key for r in reserved] == [KEY.key]
    memory.prune_reservations(worker)
    assert [k for k, _ in memory.reservations.on("w1")] == [KEY]
    assert memory.reserved_on(worker) is reserved  # not looked at again for the release


def test_the_overlay_of_a_placement_more_is_laid_on_the_last_and_reads_as_laid_anew() -> None:
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    worker = Worker("w1", unfinished={KEY})
    capacity = WorkerCapacity((Node("n1", {"cpu": 8000, "pods": 110}, {}, {}, ()),))
    memory.reservations.reserve("w1", KEY, DEMAND)
    first = memory.with_reservations(worker, capacity)
    assert first.fit(DEMAND).fits
    second_key = WorkloadKey(JOB.name, f"{NAMESPACE}/second")
    memory.reservations.reserve("w1", second_key, DEMAND)
    laid_on = memory.with_reservations(worker, capacity)
    anew = capacity.with_reservations(memory.reserved_on(worker))
    # Laid on the last overlay: its room after reservations was carried over, not recomputed.
    assert "_after_reservations" in laid_on.__dict__
    assert "_after_reservations" not in anew.__dict__
    assert laid_on.reservations == anew.reservations
    assert laid_on.fit(DEMAND) == anew.fit(DEMAND)
    assert laid_on.summary == anew.summary
    # Anything but one more (a release here) lays them all again.
    memory.reservations.release(KEY)
    again = memory.with_reservations(worker, capacity)
    assert [r.key for r in again.reservations] == [second_key.key]
    assert "_after_reservations" not in again.__dict__


def test_a_reservation_older_than_a_worker_takes_to_make_pods_takes_no_room() -> None:
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    worker = Worker("w1", unfinished={KEY})
    memory.reservations.reserve("w1", KEY, DEMAND)
    (reserved,) = memory.reserved_on(worker)
    assert reserved.groups == DEMAND
    worker.pods[(NAMESPACE, "train")] = OwnedPods(total=1, bound=1)
    clock.now += 1.0  # looked at again at least once a second
    (reserved,) = memory.reserved_on(worker)
    assert reserved.groups[0].count == 1  # less the pod bound
    clock.now += RESERVATION_MAX_AGE + 1
    assert memory.reserved_on(worker) == ()
    memory.forget_confirmed((), [worker])
    assert memory.reservations.count("w1") == 0


# -- reservations ----------------------------------------------------------------------


def test_reservations_follow_the_latest_placement() -> None:
    reservations = Reservations()
    reservations.reserve("w1", "a")
    reservations.reserve("w1", "b")
    reservations.reserve("w2", "a")  # placed again elsewhere: counted there only
    assert (reservations.count("w1"), reservations.count("w2")) == (1, 1)
    reservations.release("a")
    reservations.release("never-reserved")
    assert (reservations.count("w1"), reservations.count("w2"), reservations.count("w3")) == (
        1,
        0,
        0,
    )


def test_reservations_count_for_load_until_the_mirror_shows_and_for_room_until_bound() -> None:
    now = [0.0]
    reservations = Reservations(clock=lambda: now[0])
    groups = (PodGroup("main", 2, {"cpu": 1000}),)
    reservations.reserve("w1", "a", groups)
    reservations.reserve("w1", "b")
    assert reservations.count("w1") == 2
    reservations.mirror_visible("a")
    reservations.mirror_visible("b")
    assert reservations.count("w1") == 0
    assert [key for key, _ in reservations.on("w1")] == ["a"]
    now[0] = 30.0
    (entry,) = [e for _, e in reservations.on("w1")]
    assert reservations.age(entry) == 30.0


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["reserve", "release", "visible"]),
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from(["w1", "w2"]),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_reservations_indexed_by_cluster_agree_with_a_scan(
    steps: list[tuple[str, str, str, bool]],
) -> None:
    """Counts, lists and versions kept per cluster say what a scan of every entry says."""
    reservations = Reservations(clock=lambda: 0.0)
    demand = (PodGroup("main", 1, {"cpu": 100}),)
    for op, key, cluster, with_demand in steps:
        before = {c: reservations.version(c) for c in ("w1", "w2")}
        entries = dict(reservations._entries)
        if op == "reserve":
            reservations.reserve(cluster, key, demand if with_demand else ())
        elif op == "release":
            reservations.release(key)
        else:
            reservations.mirror_visible(key)
        for c in ("w1", "w2"):
            scan = [(k, e) for k, e in reservations._entries.items() if e.cluster == c]
            assert reservations.count(c) == sum(1 for _, e in scan if not e.mirror_visible)
            assert reservations.on(c) == [(k, e) for k, e in scan if e.demand]
            changed = [k for k, e in scan if entries.get(k) is not e] + [
                k for k, e in entries.items() if e.cluster == c and k not in reservations._entries
            ]
            if changed:
                assert reservations.version(c) != before[c]


def test_admissions_soft_state_expires_and_is_forgotten() -> None:
    from jobrelay.admission.queue_model import Entry, Preempt
    from jobrelay.admission.workload_reads import WorkloadRead
    from jobrelay.controller.relay.memory import ADMITTING_FOR, QueueMemory

    now = [0.0]
    queues = QueueMemory(lambda: now[0])
    placing, victim, gone = (WorkloadKey(JOB.name, f"{NAMESPACE}/{n}") for n in "pvg")
    queues.admit(placing, Entry(f"Job {placing.key}", "", NAMESPACE, 0, "", {}))
    queues.chose({victim: Preempt("Job x/w", "by w"), gone: Preempt("Job x/w", "by w")})
    queues.keep(WorkloadRead(victim, ("1", 0), None, None, cluster="w1"))
    queues.expire()  # the victim is placed, not marked: told on; the other is not read
    assert queues.preemption(victim) is not None and queues.preemption(gone) is None
    assert list(queues.admitting) == [placing]
    now[0] = ADMITTING_FOR + 1
    queues.expire()  # too long: its placement never showed, the victim was never marked
    assert queues.admitting == {} and queues.preemption(victim) is None
    queues.admit(placing, Entry(f"Job {placing.key}", "", NAMESPACE, 0, "", {}))
    queues.forget(placing)
    assert queues.admitting == {} and queues.admitting_since == {} and queues.read(placing) is None


def test_victims_back_in_their_queue_settle_while_their_pods_are_counted() -> None:
    from jobrelay.controller.relay.memory import SETTLE_AT_MOST, QueueMemory

    now = [0.0]
    queues = QueueMemory(lambda: now[0])
    a, b = WorkloadKey("Job.v1.batch", "ns/a"), WorkloadKey("Job.v1.batch", "ns/b")
    held = {a, b}
    assert queues.settling({}, held.__contains__) == frozenset()
    assert queues.settling({a: "Job ns/w"}, held.__contains__) == {"Job ns/w"}
    now[0] = 30.0  # however long it takes (a loaded machine), while its pods are there
    both = {a: "Job ns/w", b: "Job ns/v"}
    assert queues.settling(both, held.__contains__) == {"Job ns/w", "Job ns/v"}
    held.discard(a)  # a's pods went: its room shows free
    assert queues.settling(both, held.__contains__) == {"Job ns/v"}
    now[0] = 29.9 + SETTLE_AT_MOST  # b's worker never says: not forever (seen at 30 s)
    assert queues.settling(both, held.__contains__) == {"Job ns/v"}
    now[0] = 30.0 + SETTLE_AT_MOST
    assert queues.settling(both, held.__contains__) == frozenset()
    assert queues.settling({a: "Job ns/w"}, held.__contains__) == frozenset()
    assert b not in queues.requeued  # back in place, or gone: forgotten
    held.add(a)
    assert queues.settling({a: "Job ns/x"}, held.__contains__) == {"Job ns/x"}  # again: anew


def test_a_pod_bound_within_the_second_is_never_counted_twice() -> None:
    """A reservation's pods, once bound, count in the worker's capacity: the look at the
    reservations is taken again then, or the room would show less than it is (and a
    preemption would make room that is there already)."""
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    worker = Worker("w1", unfinished={KEY})
    memory.reservations.reserve("w1", KEY, DEMAND)
    memory.reservations.mirror_visible(KEY)
    assert [r.key for r in memory.reserved_on(worker)] == [KEY.key]
    worker.pods[(NAMESPACE, "train")] = OwnedPods(total=2, bound=2, started=True)
    worker.bindings_version += 1  # within the same second
    assert memory.reserved_on(worker) == ()


def test_within_the_second_only_changed_reservations_are_looked_at_again() -> None:
    """A burst places many workloads on a worker: each look takes the reservations that
    did not change, and their workloads' pods are not looked up again, unless they were
    bound or went since (the worker says whose bindings moved) or a second passed."""
    clock = Clock()
    memory = RelayMemory(monotonic=clock)
    worker = Worker("w1", unfinished={KEY, OTHER}, rebound=[])
    memory.reservations.reserve("w1", KEY, DEMAND)
    assert [r.key for r in memory.reserved_on(worker)] == [KEY.key]
    worker.looked_up.clear()
    memory.reservations.reserve("w1", OTHER, DEMAND)  # a new placement: only it is looked at
    assert sorted(r.key for r in memory.reserved_on(worker)) == sorted([KEY.key, OTHER.key])
    assert worker.looked_up == [(OTHER.namespace, OTHER.name)]
    worker.looked_up.clear()
    worker.pods[(KEY.namespace, KEY.name)] = OwnedPods(total=2, bound=2, started=True)
    worker.bindings_version += 1
    worker.rebound.append((worker.bindings_version, (KEY.namespace, KEY.name)))
    assert [r.key for r in memory.reserved_on(worker)] == [OTHER.key]  # KEY's pods are bound
    assert worker.looked_up == [(KEY.namespace, KEY.name)]
    worker.looked_up.clear()
    memory.reservations.mirror_visible(OTHER)  # seen: looked at again
    memory.reserved_on(worker)
    assert worker.looked_up == [(OTHER.namespace, OTHER.name)]
    worker.looked_up.clear()
    worker.rebound = None  # too long ago to say: every one
    memory.reservations.reserve("w1", KEY, DEMAND)
    memory.reserved_on(worker)
    assert sorted(worker.looked_up) == sorted(
        [(KEY.namespace, KEY.name), (OTHER.namespace, OTHER.name)]
    )
    worker.rebound = []
    worker.looked_up.clear()
    clock.now += 1.0  # a new second: every one (an age may have run out)
    memory.reserved_on(worker)
    assert len(worker.looked_up) == 2
