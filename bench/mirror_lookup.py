"""``python -m bench.mirror_lookup``: what asking "is there a mirror of it?" costs an
admission pass, by number of workers (issue 36).

Pure, no fleet. Every pass asks it of every cached workload. The pool answered one key at
a time (``WorkerPool.has_mirror``: one cache lookup per worker), so a pass grew with held
workloads times workers; the pass now asks once for the set of every cached mirror's key
(``WorkerPool.mirror_keys``) and looks each workload up in it. Both are timed here on the
pool's own code, over workers whose Job mirror caches hold ``--running`` mirrors in all.
"""

from __future__ import annotations

import statistics
import time
import types

import click

from jobrelay.fleet.workers.pool import WorkerPool
from jobrelay.fleet.workers.record import Worker
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.watching import Informer

KIND = "Job.v1.batch"


def _pool(workers: int, running: int) -> WorkerPool:
    """A pool of ``workers`` whose mirror caches hold ``running`` Job mirrors in all: the
    pool's and a worker's own lookup code over plain caches (nothing connects)."""
    records = {}
    for at in range(workers):
        informer = object.__new__(Informer)
        informer._cache = {
            f"team-{i % 1000:04d}/run-{at}-{i}": {} for i in range(running // workers)
        }
        worker = types.SimpleNamespace(mirrors={KIND: informer})
        worker.mirror = types.MethodType(Worker.mirror, worker)
        worker.keys = types.MethodType(Worker.keys, worker)
        record = types.SimpleNamespace(worker=worker, mirror_keys=worker.keys)
        records[f"worker-{at}"] = record
    pool = object.__new__(WorkerPool)
    pool._records = records  # type: ignore[assignment]
    return pool


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--held", default=100_000, show_default=True, type=click.IntRange(1))
@click.option("--running", default=1_000, show_default=True, type=click.IntRange(0))
@click.option("--workers", "counts", default="3,8,32", show_default=True,
              help="Numbers of workers, comma-separated.")  # fmt: skip
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(1))
def main(held: int, running: int, counts: str, repeats: int) -> None:
    """Time a pass's mirror lookups: one per worker per workload, against one set."""
    keys = [WorkloadKey(KIND, f"team-{i % 1000:04d}/job-{i}") for i in range(held)]
    for workers in (int(count) for count in counts.split(",")):
        pool = _pool(workers, running)
        each, once = [], []
        for _ in range(repeats):
            began = time.process_time()
            found = sum(pool.has_mirror(key) for key in keys)
            each.append(time.process_time() - began)
            began = time.process_time()
            mirrored = pool.mirror_keys()
            assert sum(key in mirrored for key in keys) == found
            once.append(time.process_time() - began)
        click.echo(
            f"{workers} workers, {held} workloads, {running} mirrors: a lookup per worker "
            f"{statistics.median(each) * 1000:.0f} ms a pass, one set "
            f"{statistics.median(once) * 1000:.0f} ms (CPU, median of {repeats})"
        )


if __name__ == "__main__":
    main()
