"""``python -m bench.held_backlog``: a controller holding a big backlog (issue 36).

Pure, no fleet. 100,000 delegated Jobs (bench.held_memory's, from a few pod templates)
held in 1,000 RelayQueues, one team namespace each, and three figures:

- **restart to ready**: what a restarted controller does before it admits anything,
  timed: the informer's list decoded page by page (500 Jobs a page, as JSON bytes the
  way the apiserver sends them) through the management cache's transform into the cache,
  then the first admission view built (every workload read as admission reads it) and
  planned once. Making the pages (the apiserver's work) is not timed.
- **RSS**: the process's resident memory with all of them held (the cache and the reads
  kept, as the controller keeps them), besides what it was before the list.
- **the admission pass**: the controller's own pass over them again
  (:meth:`~jobrelay.controller.relay.queue_admission.QueueAdmission.run_pass`: every
  cached workload looked up as admission read it, then
  :func:`~jobrelay.admission.planner.plan`), as every later pass runs (reads and
  entries reused from the pass before), each workload judged by placement's own check
  (:class:`~jobrelay.placement.held.Room`) on three workers of eight nodes with room
  for ``--room`` of them: the rest wait.
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
from typing import Any

import click
import msgspec

from bench.held_memory import job_object
from bench.queue_gate_pass import EmptyCache, Queues
from jobrelay.admission.queue_model import QueueSpec
from jobrelay.admission.workload_reads import fleet_of
from jobrelay.controller.kind_resolution import managed_by
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.watching import object_key
from jobrelay.placement.capacity import Node, WorkerCapacity
from jobrelay.placement.held import Room
from jobrelay.placement.model import Cluster
from jobrelay.placement.units import PODS
from jobrelay.placement.workload import Choice, Workload, read_workload
from jobrelay.vocabulary.collection_pause import collection_paused
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, QUEUE_LABEL

JOB = JobKind()
PAGE = 500  # the informer's page size (InformerOptions.page_size)
TARGET_RSS_MIB, TARGET_READY_S, TARGET_PASS_S = 300, 60.0, 1.0


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def _page(start: int, count: int, queues: int, templates: int) -> bytes:
    """One list page as the apiserver sends it: Jobs ``start`` onward, each in its queue's
    namespace and labelled with its queue."""
    items = []
    for index in range(start, start + count):
        job = job_object(index, 0, templates)
        queue = f"queue-{index % queues:04d}"
        job["metadata"]["namespace"] = f"team-{index % queues:04d}"
        job["metadata"]["labels"][QUEUE_LABEL] = queue
        items.append(job)
    return msgspec.json.encode(
        {"apiVersion": "batch/v1", "kind": "JobList", "metadata": {"resourceVersion": "1"},
         "items": items}
    )  # fmt: skip


WORKERS, NODES = 3, 8


def _fleet(workload: Workload, room: int) -> list[WorkerCapacity]:
    """Three workers of eight nodes with room for ``room`` workloads like ``workload``
    in all (whole workloads' worth a node, so placement's fit is what ends the room)."""
    one: dict[str, int] = {PODS: 0}
    for group in workload.groups:
        one[PODS] += group.count
        for name, quantity in group.requests.items():
            one[name] = one.get(name, 0) + quantity * group.count
    nodes = WORKERS * NODES
    takes = [room // nodes + (1 if n < room % nodes else 0) for n in range(nodes)]
    return [
        WorkerCapacity(
            tuple(
                Node(f"node-{n}", {name: q * takes[w * NODES + n] for name, q in one.items()})
                for n in range(NODES)
            )
        )
        for w in range(WORKERS)
    ]


def _pass(admission: QueueAdmission, cache: dict[str, dict[str, Any]],
          capacities: list[WorkerCapacity], held: dict[WorkloadKey, str]
          ) -> list[WorkloadKey]:  # fmt: skip
    """One pass as the controller's (``Reconciler.placeable_held``): every cached Job, all
    held (``held``: their keys, kept between passes as the controller's memory keeps
    them), each fitting only if placement would place it now, taking its room."""
    room = Room([Cluster(f"worker-{w}", capacity=c) for w, c in enumerate(capacities)])
    policy = Choice()

    def fits(key: WorkloadKey, workload: Workload) -> bool:
        return room.take(key, workload, policy)

    caches = [(JOB.name, JOB, cache)]
    return admission.run_pass(caches, list(held), fits, fleet_of(capacities), None,
                              lambda _key: False)  # fmt: skip


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--workloads", default=100_000, show_default=True, type=click.IntRange(1))
@click.option("--queues", default=1_000, show_default=True, type=click.IntRange(1))
@click.option(
    "--templates",
    default=20,
    show_default=True,
    type=click.IntRange(0),
    help="Distinct pod templates the Jobs are made from (0: each its own).",
)
@click.option(
    "--room",
    default=1_000,
    show_default=True,
    type=click.IntRange(0),
    help="Workloads the fleet has room for in a pass (the rest wait).",
)
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(1))
@click.option(
    "--clock",
    type=click.Choice(["wall", "cpu"]),
    default="wall",
    show_default=True,
    help="Time with the wall clock, or with this process's CPU time (less moved by a "
    "busy machine; the targets are wall-clock).",
)
def main(workloads: int, queues: int, templates: int, room: int, repeats: int, clock: str) -> None:
    """Hold a backlog of Jobs: restart-to-ready time, RSS and the admission pass."""
    now = time.perf_counter if clock == "wall" else time.process_time
    transform = managed_by(JOB, DEFAULT_CONTROLLER_NAME)
    specs = {f"queue-{q:04d}": QueueSpec(f"queue-{q:04d}") for q in range(queues)}
    gc.collect()
    rss_before = _rss_mib()
    cache: dict[str, dict[str, Any]] = {}
    listing = 0.0
    for start in range(0, workloads, PAGE):
        page = _page(start, min(PAGE, workloads - start), queues, templates)
        began = now()
        with collection_paused():  # as the controller's list (kube/requesting.py)
            for item in msgspec.json.decode(page)["items"]:
                kept = transform(item)
                if kept is not None:
                    cache[object_key(kept)] = kept
        listing += now() - began
        del page
    admission = QueueAdmission(priority_classes=EmptyCache(), quotas=EmptyCache(),
                               queues=Queues(specs), mirror_keys=frozenset,
                               memory=QueueMemory())  # fmt: skip
    some = next(iter(cache.values()))
    workload = read_workload(JOB, some)
    assert isinstance(workload, Workload)
    capacities = _fleet(workload, room)
    held = {WorkloadKey(JOB.name, key): "" for key in cache}
    began = now()
    _pass(admission, cache, capacities, held)
    ready = listing + now() - began
    gc.collect()
    rss_after = _rss_mib()
    # Both clocks over the same passes: on a shared machine the wall clock also counts
    # the time others' work took the core, and the two side by side show how much.
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeats):
        gc.collect()  # the setup's garbage is not the pass's cost
        wall_began, cpu_began = time.perf_counter(), time.process_time()
        _pass(admission, cache, capacities, held)
        walls.append(time.perf_counter() - wall_began)
        cpus.append(time.process_time() - cpu_began)
    times, other = (walls, cpus) if clock == "wall" else (cpus, walls)
    median = statistics.median(times)
    last = admission.memory.last
    assert last is not None
    held = len(cache) - len(last.admitted)
    click.echo(
        f"{len(cache)} Jobs from {templates or workloads} pod templates in {queues} queues: "
        f"ready after {ready:.1f} s (list decoded and cached {listing:.1f} s, first "
        f"admission view {ready - listing:.1f} s); RSS {rss_after:.0f} MiB "
        f"(+{rss_after - rss_before:.0f} MiB for the backlog, "
        f"{(rss_after - rss_before) * 2**20 / len(cache) / 1024:.2f} KiB a workload); "
        f"admission pass median {median * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        f"({len(last.admitted)} admitted, {held} held; the "
        f"{'CPU' if clock == 'wall' else 'wall'} clock's median over the same passes "
        f"{statistics.median(other) * 1000:.0f} ms)"
    )
    verdicts = [
        ("RSS", rss_after <= TARGET_RSS_MIB, f"{TARGET_RSS_MIB} MiB"),
        ("ready", ready <= TARGET_READY_S, f"{TARGET_READY_S:g} s"),
        ("pass", median <= TARGET_PASS_S, f"{TARGET_PASS_S:g} s"),
    ]
    click.echo(
        "; ".join(f"{name} {'within' if ok else 'OVER'} {target}" for name, ok, target in verdicts)
    )


if __name__ == "__main__":
    main()
