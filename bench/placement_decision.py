"""``python -m bench.placement_decision``: how long one placement decision takes.

Pure, no fleet: 20 generated clusters of 500 nodes each (a CPU pool, a tainted GPU
pool, some nodes cordoned or not Ready, random load and reservations), and the time
``place`` takes for workloads of several shapes against them. The target is a
decision under 1 ms. A capacity snapshot's indices are built when it changes, not per
decision: that cost is printed apart.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable

import click

from bench.stats import summarize
from jobrelay.placement.capacity import Node, Reservation, WorkerCapacity
from jobrelay.placement.decision import Decision, place
from jobrelay.placement.model import Cluster
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import (
    Choice,
    PodGroup,
    Strategy,
    Taint,
    Toleration,
    Workload,
)

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
TARGET_MS = 1.0


def _node(rng: random.Random, cluster: str, index: int) -> Node:
    gpu = index % 10 == 0  # a tenth of the nodes are GPU nodes
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    if gpu:
        allocatable["nvidia.com/gpu"] = "8"
    used = {
        "cpu": f"{rng.randrange(0, 64000, 250)}m",
        "memory": f"{rng.randrange(0, 256)}Gi",
        "pods": str(rng.randrange(0, 100)),
    }
    if gpu:
        used["nvidia.com/gpu"] = str(rng.randrange(0, 9))
    return Node(
        name=f"{cluster}-node-{index:04d}",
        allocatable=resources_of(allocatable),
        requested=resources_of(used),
        labels={
            "topology.kubernetes.io/zone": f"zone-{index % 3}",
            "pool": "gpu" if gpu else "cpu",
        },
        taints=(GPU_TAINT,) if gpu else (),
        unschedulable=rng.random() < 0.02,
        ready=rng.random() > 0.01,
    )


def fleet(clusters: int, nodes: int, seed: int = 7) -> list[Cluster]:
    rng = random.Random(seed)
    made = []
    for c in range(clusters):
        name = f"worker-{c:02d}"
        reservations = tuple(
            Reservation(f"ns/held-{r}", (PodGroup("main", 4, resources_of({"cpu": "2"})),))
            for r in range(rng.randrange(0, 20))
        )
        capacity = WorkerCapacity(tuple(_node(rng, name, i) for i in range(nodes)), reservations)
        made.append(Cluster(name, {"region": ("west", "east")[c % 2]}, capacity=capacity))
    return made


WORKLOADS: dict[str, Workload] = {
    "small cpu job (4 pods x 2 cpu)": Workload(
        (PodGroup("main", 4, resources_of({"cpu": "2", "memory": "4Gi"})),)
    ),
    "gpu job (2 pods x 4 gpu, tolerates)": Workload(
        (
            PodGroup(
                "main",
                2,
                resources_of({"cpu": "8", "nvidia.com/gpu": "4"}),
                {"pool": "gpu"},
                tolerations=(Toleration("nvidia.com/gpu", "Exists"),),
            ),
        ),
        Choice(selector=None, strategy=Strategy.PACK),
    ),
    "wide job (200 pods x 8 cpu), ordered": Workload(
        (PodGroup("main", 200, resources_of({"cpu": "8", "memory": "16Gi"})),),
        Choice(clusters=("worker-03", "worker-01", "worker-07"), strategy=Strategy.ORDERED),
    ),
    "never fits (1 pod x 128 cpu)": Workload((PodGroup("main", 1, resources_of({"cpu": "128"})),)),
}


def _time(decide: Callable[[], Decision], repeats: int) -> list[float]:
    decide()  # warm the snapshot's indices: built once per capacity change
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        decide()
        times.append((time.perf_counter() - start) * 1000)
    return times


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--clusters", default=20, show_default=True, type=click.IntRange(1))
@click.option(
    "--nodes", default=500, show_default=True, type=click.IntRange(1), help="Per cluster."
)
@click.option("--repeats", default=300, show_default=True, type=click.IntRange(1))
def main(clusters: int, nodes: int, repeats: int) -> None:
    """Time one placement decision against generated clusters."""
    start = time.perf_counter()
    workers = fleet(clusters, nodes)
    for worker in workers:
        assert worker.capacity is not None
        _ = worker.capacity.pool
    build = (time.perf_counter() - start) * 1000 / clusters
    click.echo(f"{clusters} clusters x {nodes} nodes; snapshot build {build:.1f} ms per cluster")
    worst = 0.0
    for label, workload in WORKLOADS.items():
        decision = place(workers, workload)
        stats = summarize(_time(functools.partial(place, workers, workload), repeats))
        worst = max(worst, stats["p50"])
        outcome = decision.cluster or ("NeverFits" if decision.never_fits else "NotPlaced")
        click.echo(
            f"  {label:40} -> {outcome:10} median {stats['p50']:.3f} ms  "
            f"p99 {stats['p99']:.3f} ms  max {stats['max']:.3f} ms"
        )
    verdict = "within" if worst < TARGET_MS else "OVER"
    click.echo(f"worst median {worst:.3f} ms: {verdict} the {TARGET_MS:g} ms target")


if __name__ == "__main__":
    main()
