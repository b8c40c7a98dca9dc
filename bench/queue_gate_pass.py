"""``python -m bench.queue_gate_pass``: the controller's whole admission pass.

No fleet: :meth:`controller.relay.queue_admission.QueueAdmission.run_pass` over 10,000
queued Jobs (and 2,000 placed) in 50 RelayQueues, as the controller's caches hold them:
reading each object (cached per resourceVersion), building the view, the pure plan
(:func:`jobrelay.admission.planner.plan`: choosing queues, the fair order, the hold
messages and the queues' figures). The placement check admits one workload in 20.
Target: under 100 ms, like the pure pass it wraps (``bench.admission_pass``).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from typing import Any

import click

from bench.workload import PodShape, job_manifest
from jobrelay.admission.queue_model import Fleet, QueueSpec
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.placement.workload import Workload
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, DEFAULT_CONTROLLER_NAME, QUEUE_LABEL

TARGET_S = 0.100


class EmptyCache:
    """A cache that holds nothing (no PriorityClass, no ResourceQuota)."""

    def values(self) -> list[dict[str, Any]]:
        return []


class Queues:
    """The RelayQueues as the controller's cache gives them (all valid)."""

    def __init__(self, specs: dict[str, QueueSpec]) -> None:
        self._specs = specs

    def specs(self) -> dict[str, QueueSpec]:
        return dict(self._specs)


def objects(
    kind: JobKind, queues: int, pending: int, placed: int
) -> list[tuple[WorkloadKey, JobKind, JsonObj]]:
    rng = random.Random(3)
    made = []
    for index in range(pending + placed):
        obj = job_manifest(f"job-{index:05d}", "team", "bench", PodShape(cpu="1"),
                           managed_by=DEFAULT_CONTROLLER_NAME)  # fmt: skip
        metadata = obj["metadata"]
        metadata["resourceVersion"] = str(index + 1)
        metadata["uid"] = f"uid-{index}"
        metadata["creationTimestamp"] = (
            f"2026-01-01T{index // 3600 % 24:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z"
        )
        metadata["labels"][QUEUE_LABEL] = f"team-{rng.randrange(queues):02d}"
        if index >= pending:
            metadata["annotations"] = {CLUSTER_ANNOTATION: f"worker-{index % 20}"}
        made.append((WorkloadKey(kind.name, f"team/{metadata['name']}"), kind, obj))
    return made


def _never(_key: WorkloadKey) -> bool:
    """No requeued victim's pods are still counted on a worker (no preemption here)."""
    return False


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--queues", "queue_count", default=50, show_default=True, type=click.IntRange(1))
@click.option("--pending", default=10_000, show_default=True, type=click.IntRange(1))
@click.option("--placed", default=2_000, show_default=True, type=click.IntRange(0))
@click.option("--repeats", default=15, show_default=True, type=click.IntRange(1))
def main(queue_count: int, pending: int, placed: int, repeats: int) -> None:
    """Time the controller's admission pass over queued Jobs."""
    kind = JobKind()
    specs = {f"team-{i:02d}": QueueSpec(f"team-{i:02d}", nominal={"cpu": 100_000})
             for i in range(queue_count)}  # fmt: skip
    snapshot = objects(kind, queue_count, pending, placed)
    held = [key for key, _kind, obj in snapshot if CLUSTER_ANNOTATION not in
            (obj["metadata"].get("annotations") or {})]  # fmt: skip
    gate = QueueAdmission(priority_classes=EmptyCache(), quotas=EmptyCache(), queues=Queues(specs),
                          mirror_keys=frozenset, memory=QueueMemory())  # fmt: skip
    fleet = Fleet({"cpu": 20 * 1_000_000})
    judged = [0]

    def fits(_key: WorkloadKey, _workload: Workload) -> bool:
        judged[0] += 1
        return judged[0] % 20 == 0

    caches = [(kind.name, kind, {key.key: obj for key, _kind, obj in snapshot})]
    gate.run_pass(caches, held, fits, fleet, None, _never)  # the first reads every object once
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        gate.run_pass(caches, held, fits, fleet, None, _never)
        times.append(time.perf_counter() - start)
    times.sort()
    median = statistics.median(times)
    click.echo(
        f"controller pass over {pending} queued and {placed} placed Jobs in {queue_count} "
        f"queues: median {median * 1000:.1f} ms, min {times[0] * 1000:.1f} ms, "
        f"max {times[-1] * 1000:.1f} ms"
    )
    click.echo(f"{'within' if median < TARGET_S else 'OVER'} the {TARGET_S * 1000:g} ms target")


if __name__ == "__main__":
    main()
