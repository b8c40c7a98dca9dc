"""``python -m bench.placement_held``: one pass over the held workloads when capacity frees.

Pure, no fleet: the clusters of ``bench.placement_decision`` (20 x 500 nodes by
default), 10,000 held workloads of mixed shapes (most too large for what is free, a
few that now fit), and the time :func:`placement.held.placeable` takes to find which
to wake, oldest first, each taking its room before the next is judged. Target: the
pass under 1 s.
"""

from __future__ import annotations

import random
import statistics
import time

import click

from bench.placement_decision import fleet
from jobrelay.placement.held import placeable
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import Choice, PodGroup, Strategy, Toleration, Workload

TARGET_S = 1.0


def held_workloads(count: int, seed: int = 11) -> list[tuple[str, Workload, Choice]]:
    """Mixed shapes: wide CPU jobs, GPU jobs, some pinned to a few clusters, some ordered."""
    rng = random.Random(seed)
    made = []
    for index in range(count):
        roll = rng.random()
        if roll < 0.6:
            group = PodGroup("main", rng.choice((8, 32, 64)), resources_of({"cpu": "48"}))
        elif roll < 0.9:
            group = PodGroup(
                "main", rng.choice((2, 4)), resources_of({"cpu": "8", "nvidia.com/gpu": "8"}),
                {"pool": "gpu"}, tolerations=(Toleration("nvidia.com/gpu", "Exists"),),
            )  # fmt: skip
        else:
            group = PodGroup("main", 1, resources_of({"cpu": "1", "memory": "1Gi"}))
        choice = Choice()
        if rng.random() < 0.2:
            choice = Choice(
                clusters=tuple(f"worker-{rng.randrange(20):02d}" for _ in range(3)),
                strategy=Strategy.ORDERED,
            )
        made.append((f"ns/held-{index:05d}", Workload((group,), choice), Choice()))
    return made


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--clusters", default=20, show_default=True, type=click.IntRange(1))
@click.option("--nodes", default=500, show_default=True, type=click.IntRange(1),
              help="Per cluster.")  # fmt: skip
@click.option("--held", "count", default=10_000, show_default=True, type=click.IntRange(1))
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1))
def main(clusters: int, nodes: int, count: int, repeats: int) -> None:
    """Time one pass over held workloads against generated clusters."""
    workers = fleet(clusters, nodes)
    for worker in workers:
        assert worker.capacity is not None
        _ = worker.capacity.pool  # built once per capacity change, not per pass
    held = held_workloads(count)
    times, woken = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        woken = len(placeable(held, workers))
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    click.echo(
        f"{count} held workloads, {clusters} clusters x {nodes} nodes: pass median "
        f"{median:.3f} s (min {min(times):.3f} s, max {max(times):.3f} s), "
        f"{median / count * 1e6:.1f} us per workload, {woken} woken"
    )
    verdict = "within" if median < TARGET_S else "OVER"
    click.echo(f"{verdict} the {TARGET_S:g} s target")


if __name__ == "__main__":
    main()
