"""``python -m bench.admission_pass``: one admission pass over the held workloads.

Pure, no fleet: 10,000 pending workloads in 50 RelayQueues (mixed weights, some with
quotas, some StrictFIFO, a few thousand already admitted) against 20 clusters whose
room is a capacity counter each (the first cluster with room takes a workload), and the
time :func:`jobrelay.admission.fair_order.admission_pass` takes to order, check quotas and
admit. Target: the pass under 100 ms.
"""

from __future__ import annotations

import dataclasses
import gc
import random
import statistics
import time

import click

from jobrelay.admission.fair_order import admission_pass
from jobrelay.admission.preemption_rules import PREEMPTING_PER_PASS, Shortfall, plan_preemptions
from jobrelay.admission.queue_model import (
    Entry,
    Fleet,
    QueueingStrategy,
    QueueSpec,
    Reclaim,
    WithinQueue,
)
from jobrelay.placement.units import resources_of

TARGET_S = 0.100
CLUSTER_CPU, CLUSTER_MEMORY = 1_000, 4_000 * 2**30  # 1,000 cores and 4,000 GiB each


def fleet_queues(count: int, seed: int = 5) -> dict[str, QueueSpec]:
    rng = random.Random(seed)
    queues = {}
    for index in range(count):
        name = f"team-{index:02d}"
        quota = rng.random() < 0.5
        queues[name] = QueueSpec(
            name,
            weight=rng.choice((1.0, 1.0, 2.0, 4.0)),
            strategy=(
                QueueingStrategy.STRICT_FIFO
                if rng.random() < 0.2
                else QueueingStrategy.BEST_EFFORT_FIFO
            ),
            nominal=resources_of({"cpu": str(rng.choice((64, 256, 512)))}) if quota else {},
            borrowing_limit=resources_of({"cpu": str(rng.choice((0, 128, 512)))}) if quota else {},
        )
    return queues


def entries(queues: list[str], pending: int, admitted: int, seed: int = 7) -> list[Entry]:
    rng = random.Random(seed)
    made = []
    for index in range(pending + admitted):
        cpu = rng.choice((1, 1, 2, 4, 8, 32))
        made.append(
            Entry(
                key=f"Job ns-{index % 97}/job-{index:05d}",
                queue=rng.choice(queues),
                namespace=f"ns-{index % 97}",
                priority=rng.choice((0, 0, 0, 100, 1000)),
                created=f"2026-01-01T{index // 3600 % 24:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z",
                requests=resources_of({"cpu": str(cpu), "memory": f"{cpu * 4}Gi"}),
                admitted=index >= pending,
            )
        )
    return made


class Clusters:
    """The caller's placement check, as cheap as it gets: a free-CPU and free-memory
    counter per cluster; the first with room takes the workload."""

    def __init__(self, count: int, used: list[Entry]) -> None:
        self.free = [[CLUSTER_CPU * 1000, CLUSTER_MEMORY] for _ in range(count)]
        for index, entry in enumerate(used):
            room = self.free[index % count]
            room[0] -= entry.requests["cpu"]
            room[1] -= entry.requests["memory"]
        self.most_cpu = max(room[0] for room in self.free)

    def fits(self, entry: Entry) -> bool:
        cpu, memory = entry.requests["cpu"], entry.requests["memory"]
        if cpu > self.most_cpu:  # no cluster has that much CPU left
            return False
        for room in self.free:
            if room[0] >= cpu and room[1] >= memory:
                room[0] -= cpu
                room[1] -= memory
                self.most_cpu = max(room[0] for room in self.free)
                return True
        return False


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--clusters", default=20, show_default=True, type=click.IntRange(1))
@click.option("--queues", "queue_count", default=50, show_default=True, type=click.IntRange(1))
@click.option("--pending", default=10_000, show_default=True, type=click.IntRange(1))
@click.option("--admitted", default=2_000, show_default=True, type=click.IntRange(0),
              help="Workloads already running (their queues' usage).")  # fmt: skip
@click.option("--repeats", default=21, show_default=True, type=click.IntRange(1))
def main(clusters: int, queue_count: int, pending: int, admitted: int, repeats: int) -> None:
    """Time one admission pass over pending workloads in queues against clusters."""
    queues = fleet_queues(queue_count)
    snapshot = entries(sorted(queues), pending, admitted)
    running = [entry for entry in snapshot if entry.admitted]
    fleet = Fleet(resources_of({"cpu": str(CLUSTER_CPU * clusters),
                                "memory": f"{4_000 * clusters}Gi"}))  # fmt: skip
    times, chosen = [], 0
    for _ in range(repeats):
        room = Clusters(clusters, running)  # fresh room each pass, outside the timing
        gc.collect()  # the setup's garbage is not the pass's cost
        start = time.perf_counter()
        chosen = len(admission_pass(queues, snapshot, fleet, fits=room.fits).admitted)
        times.append(time.perf_counter() - start)
    times.sort()
    median = statistics.median(times)
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    click.echo(
        f"{pending} pending workloads in {queue_count} queues, {clusters} clusters: pass median "
        f"{median * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms (min {times[0] * 1000:.1f} ms), "
        f"{median / pending * 1e6:.1f} us per workload, {chosen} admitted"
    )
    verdict = "within" if p95 < TARGET_S else "OVER"
    click.echo(f"{verdict} the {TARGET_S * 1000:g} ms target")
    preemption_figures(queues, snapshot, fleet, clusters, repeats)


# As many waiting workloads as the controller lets ask for preemption in one pass.
WINNERS = PREEMPTING_PER_PASS


def preemption_figures(
    queues: dict[str, QueueSpec], snapshot: list[Entry], fleet: Fleet, clusters: int, repeats: int
) -> None:
    """One preemption plan on a full fleet where every queue may reclaim and displace
    lower priorities: the first waiting workloads ask, each for room on one cluster."""
    anyone = {
        name: dataclasses.replace(queue, reclaim=Reclaim.ANY,
                                  within_queue=WithinQueue.LOWER_PRIORITY)
        for name, queue in queues.items()
    }  # fmt: skip
    placed = [
        dataclasses.replace(entry, cluster=f"c{index % clusters}") if entry.admitted else entry
        for index, entry in enumerate(snapshot)
    ]
    waiting = [(entry, Shortfall.ROOM) for entry in placed if not entry.admitted][:WINNERS]
    full = {f"c{index}": {"cpu": 0, "memory": 0} for index in range(clusters)}
    times, victims = [], 0
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        chosen = plan_preemptions(waiting, anyone, placed, fleet, free=full)
        times.append(time.perf_counter() - start)
        victims = sum(len(found.victims) for found in chosen)
    times.sort()
    click.echo(
        f"preemption plan for {len(waiting)} waiting over {len(placed)} workloads on a full "
        f"fleet: median {statistics.median(times) * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms, "
        f"{len(chosen)} winners given {victims} victims"
    )


if __name__ == "__main__":
    main()
