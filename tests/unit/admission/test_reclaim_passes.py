"""A reclaim over many admission passes takes no more than the winner's queue needs: the
issue's case (queue b, nominal 16 CPUs, takes its quota back from queue a, which borrowed
the whole fleet with one-CPU Jobs) preempts exactly 16 of a's Jobs, however many Jobs b
submits, whether the room its victims free shows at once or a pass late, and whatever
the Jobs' sizes. Simulated with the planner itself, pass after pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import queue, queues
from tests.unit.admission.test_planner import Room, candidate, view

from jobrelay.admission.planner import Candidate, plan
from jobrelay.admission.preemption_rules import PREEMPTING_PER_QUEUE, marks_of
from jobrelay.admission.queue_model import Reclaim
from jobrelay.kinds.base import WorkloadKey

FLEET_CPUS = 32


@dataclasses.dataclass
class Fleet:
    """The workloads of queues a and b on one 32-CPU cluster, as the caches show them."""

    workloads: dict[WorkloadKey, Candidate]
    lag: int  # passes before a victim's room shows free once it left
    gone_at: dict[WorkloadKey, int] = dataclasses.field(default_factory=dict)
    nominated: frozenset[str] = frozenset()
    preempted: set[WorkloadKey] = dataclasses.field(default_factory=set)
    requeued_since: dict[WorkloadKey, int] = dataclasses.field(default_factory=dict)

    def occupied(self, now: int) -> int:
        """CPU taken on the cluster: placed ones, and victims whose pods still show."""
        taking = [c for c in self.workloads.values() if c.admitted]
        taking += [self.workloads[k] for k, at in self.gone_at.items() if now < at + self.lag]
        return sum(c.read.workload.demand["cpu"] for c in taking if c.read.workload is not None)

    def settling(self, now: int) -> frozenset[str]:
        """As the controller's memory says: winners whose victims left a moment ago."""
        return frozenset(
            self.workloads[k].read.preempted_by
            for k, since in self.requeued_since.items()
            if now - since <= self.lag and self.workloads[k].read.preempted_by
        )

    def step(self, now: int, specs: Mapping) -> None:
        free = FLEET_CPUS * 1000 - self.occupied(now)
        room = Room(free // 1000)
        room.free = free
        seen = view(*self.workloads.values(), specs=specs, room=lambda: (
            {"w1": {"cpu": room.free}}, lambda _k, _w: ("w1",)),
            settling=self.settling(now), nominated=self.nominated)  # fmt: skip
        made = plan(dataclasses.replace(seen, fits=room.fits))
        self.nominated = made.nominated
        # Victims marked a pass ago leave now (their mirrors gone, unplaced).
        for at, c in list(self.workloads.items()):
            if c.admitted and c.read.preempted_by:
                read = dataclasses.replace(c.read, cluster="")
                self.workloads[at] = c._replace(read=read, admitted=False)
                self.gone_at[at] = now
                self.requeued_since[at] = now
        # Those this plan chose are marked.
        for at, told in made.victims.items():
            c = self.workloads[at]
            self.workloads[at] = c._replace(read=dataclasses.replace(c.read, preempted_by=told.by))
            self.preempted.add(at)
        # Those admitted are placed (and their mark cleared).
        for at in made.admitted:
            c = self.workloads[at]
            if not c.admitted:
                read = dataclasses.replace(c.read, cluster="w1", preempted_by="")
                self.workloads[at] = c._replace(read=read, admitted=True)
                self.requeued_since.pop(at, None)


def reclaim(b_jobs: list[int], lag: int, a_cpu: int = 1, b_namespace: str = "ns") -> Fleet:
    a_count = FLEET_CPUS // a_cpu
    workloads = [candidate(f"a{i}", "a", cpu=a_cpu, created=i, placed="w1")
                 for i in range(a_count)]  # fmt: skip
    workloads += [candidate(f"b{i}", "b", cpu=c, created=40 + i, namespace=b_namespace)
                  for i, c in enumerate(b_jobs)]  # fmt: skip
    return Fleet({c.key: c for c in workloads}, lag)


SPECS = queues(queue("a", nominal={"cpu": "16"}),
               queue("b", nominal={"cpu": "16"}, reclaim=Reclaim.ANY))  # fmt: skip


def run(fleet: Fleet, passes: int = 40) -> Fleet:
    for now in range(passes):
        fleet.step(now, SPECS)
    return fleet


def b_cpu(fleet: Fleet) -> int:
    """The CPU of b's Jobs placed now."""
    return sum(
        c.read.workload.demand["cpu"]
        for c in fleet.workloads.values()
        if c.admitted and c.read.workload is not None and c.key.name.startswith("b")
    )


@pytest.mark.parametrize("lag", [0, 1, 3])
@pytest.mark.parametrize("b_jobs", [[1] * 16, [2] * 8, [1] * 24, [16], [4, 4, 4, 4, 4]])
def test_b_takes_back_its_16_cpus_by_preempting_16_of_as_one_cpu_jobs(
    b_jobs: list[int], lag: int
) -> None:
    fleet = run(reclaim(b_jobs, lag))
    assert len(fleet.preempted) == 16, sorted(k.name for k in fleet.preempted)
    assert b_cpu(fleet) == 16_000


def test_a_winner_of_another_namespace_is_matched_by_its_mark() -> None:
    fleet = run(reclaim([1] * 16, 1, b_namespace="team-b"))
    assert len(fleet.preempted) == 16
    winner = next(c for c in fleet.workloads.values() if c.key.namespace == "team-b")
    assert winner.read.entry is not None
    assert marks_of(dataclasses.replace(winner.read.entry, queue="b"))[1].startswith(
        "a workload of queue b ("
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=12), st.integers(0, 3),
       st.sampled_from([1, 2]))  # fmt: skip
def test_a_reclaim_frees_no_more_than_b_needs_up_to_its_nominal(
    b_jobs: list[int], lag: int, a_cpu: int
) -> None:
    fleet = run(reclaim(b_jobs, lag, a_cpu=a_cpu))
    freed = len(fleet.preempted) * a_cpu * 1000
    taken = b_cpu(fleet)
    # It got what it may take back: every b Job left waiting among the first
    # PREEMPTING_PER_QUEUE in b's order (only those ask for victims in a pass) would take
    # b past its nominal. (BestEffortFIFO: a later Job that fits the room left may go
    # ahead of one that waits for victims, and then that one may no longer fit the
    # nominal.)
    waiting = sorted((c for c in fleet.workloads.values()
                      if c.key.name.startswith("b") and not c.admitted),
                     key=lambda c: int(c.key.name[1:]))[:PREEMPTING_PER_QUEUE]  # fmt: skip
    assert all(taken + c.read.workload.demand["cpu"] > 16_000
               for c in waiting if c.read.workload is not None), (taken, b_jobs)  # fmt: skip
    assert taken <= 16_000
    assert freed < taken + a_cpu * 1000  # and no victim more than that needed
