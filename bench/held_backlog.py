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
- **the admission pass**: :func:`jobrelay.admission.planner.plan` over them again, as every
  later pass runs (entries reused from the pass before), on a fleet with room for a
  few: the rest wait.
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
from jobrelay.admission.planner import AdmissionPlan, AdmissionView, Candidate, plan
from jobrelay.admission.queue_model import Fleet, QueueSpec
from jobrelay.admission.workload_reads import Priorities, WorkloadRead, read_for_admission
from jobrelay.controller.kind_resolution import managed_by
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.watching import object_key
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import Workload
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


class _Room:
    """Placement's check at its cheapest: room for ``count`` more workloads in the fleet."""

    def __init__(self, count: int) -> None:
        self.left = count

    def fits(self, key: WorkloadKey, workload: Workload) -> bool:
        del key, workload
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def _view(reads: dict[WorkloadKey, WorkloadRead], specs: dict[str, QueueSpec], room: int,
          last: AdmissionPlan | None) -> AdmissionView:  # fmt: skip
    workloads = [Candidate(key, read, False) for key, read in reads.items()]
    return AdmissionView(
        specs=specs,
        namespace_labels={},
        quotas={},
        fleet=Fleet(resources_of({"cpu": "100000", "memory": "400000Gi"})),
        workloads=workloads,
        held=list(reads),
        fits=_Room(room).fits,
        built=last.entries if last is not None else {},
    )


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
        for item in msgspec.json.decode(page)["items"]:
            kept = transform(item)
            if kept is not None:
                cache[object_key(kept)] = kept
        listing += now() - began
        del page
    began = now()
    priorities = Priorities()
    reads = {
        key: read_for_admission(key, JOB, obj, priorities)
        for key, obj in ((WorkloadKey(JOB.name, k), o) for k, o in cache.items())
    }
    first = plan(_view(reads, specs, room, None))
    ready = listing + now() - began
    gc.collect()
    rss_after = _rss_mib()
    times, last = [], first
    for _ in range(repeats):
        view = _view(reads, specs, room, last)
        gc.collect()  # the setup's garbage is not the pass's cost
        began = now()
        last = plan(view)
        times.append(now() - began)
    median = statistics.median(times)
    held = len(cache) - len(first.admitted)
    click.echo(
        f"{len(cache)} Jobs from {templates or workloads} pod templates in {queues} queues: "
        f"ready after {ready:.1f} s (list decoded and cached {listing:.1f} s, first "
        f"admission view {ready - listing:.1f} s); RSS {rss_after:.0f} MiB "
        f"(+{rss_after - rss_before:.0f} MiB for the backlog, "
        f"{(rss_after - rss_before) * 2**20 / len(cache) / 1024:.2f} KiB a workload); "
        f"admission pass median {median * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        f"({len(last.admitted)} admitted, {held} held)"
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
