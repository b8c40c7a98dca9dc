"""A controller killed at random moments neither loses a Job nor runs one twice.

100 one-pod Jobs (1-4 s each) are submitted in waves while the controller is
SIGKILLed 5 times and restarted each time (sometimes before it even got
ready). Afterwards every Job must be Complete with its mirror's status, and:

* exactly one mirror was ever created per Job: the watches on the workers saw
  one mirror uid per origin uid, and (``--keep-finished-mirrors``) exactly one
  is left across all workers, on the worker the Job's annotation names;
* no management Job ever went backwards: over every version the watch on the
  manager saw, succeeded/failed never decreased, Complete never disappeared
  once True, and the placement annotation never changed.

Set ``JOBRELAY_CHAOS_SEED`` to replay a run's timings (the seed is printed).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import defaultdict

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL
from tests.e2e.support import (
    ControllerProcess,
    Relay,
    assert_clean_mirror,
    assert_finished_status_is_sound,
    assert_status_matches,
    placement,
    versions_problems,
)
from tests.kubetools import Obj, condition, finished, is_true, job_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

CONTROLLER_ARGS = ["--keep-finished-mirrors"]
JOB_COUNT = 100
WAVES = 10
KILLS = 5
FINISH_TIMEOUT = 150.0


async def test_sigkilled_controller_loses_nothing_and_runs_nothing_twice(
    controller: ControllerProcess, relay: Relay, clients: dict[str, ApiClient]
) -> None:
    seed = int(os.environ.get("JOBRELAY_CHAOS_SEED") or time.time_ns() % 2**32)
    print(f"chaos seed: {seed} (JOBRELAY_CHAOS_SEED={seed} replays the timings)")
    submit_rng, chaos_rng = random.Random(seed), random.Random(seed + 1)
    manager = clients["manager"]
    names = [f"chaos-{index:03d}" for index in range(JOB_COUNT)]
    durations = {name: f"{submit_rng.randint(2, 8) * 500}ms" for name in names}  # 1s .. 4s
    uids: dict[str, str] = {}
    kills: list[float] = []
    started = time.monotonic()

    async def submit_in_waves() -> None:
        size = JOB_COUNT // WAVES
        for first in range(0, JOB_COUNT, size):
            batch = names[first : first + size]
            created = await asyncio.gather(
                *(
                    relay.submit(
                        job_manifest(
                            name,
                            cpu="50m",
                            annotations={"fleet.jobrelay.dev/duration": durations[name]},
                        )
                    )
                    for name in batch
                )
            )
            for job in created:
                uids[job["metadata"]["name"]] = job["metadata"]["uid"]
            await asyncio.sleep(submit_rng.uniform(0.5, 2.0))

    async def kill_and_restart() -> None:
        for _ in range(KILLS):
            # Now and then right away (mid-catch-up after a restart), else a while later.
            await asyncio.sleep(
                chaos_rng.choice([chaos_rng.uniform(0.0, 0.3), chaos_rng.uniform(0.5, 3.0)])
            )
            kills.append(time.monotonic() - started)
            await controller.kill(signal.SIGKILL)
            await controller.start(manager)
            if chaos_rng.random() < 0.6:  # else the next kill may hit it while starting
                await controller.wait_ready(manager)
        await controller.wait_ready(manager)

    await asyncio.gather(submit_in_waves(), kill_and_restart())
    print("SIGKILLs at " + ", ".join(f"{moment:.1f}s" for moment in kills))

    jobs = await wait_all_finished(relay, len(names))
    print(f"all {len(jobs)} Jobs finished after {time.monotonic() - started:.1f}s")
    assert set(jobs) == set(names)

    # Every Job completed, as its worker ran it.
    mirrors = await mirrors_by_origin(relay)
    problems: list[str] = []
    for name in names:
        job = jobs[name]
        uid = job["metadata"]["uid"]
        assert uid == uids[name], f"{name} was re-created"
        try:
            assert is_true(job, "Complete"), f"not Complete: {job.get('status')}"
            assert (condition(job, "Complete") or {}).get("reason") == "CompletionsReached"
            assert job["status"].get("succeeded") == 1, job["status"]
            assert not job["status"].get("failed"), job["status"]
            assert_finished_status_is_sound(job)
            left = mirrors.get(uid, [])
            assert len(left) == 1, f"{len(left)} mirrors left: {[w for w, _ in left]}"
            worker, mirror = left[0]
            assert placement(job) == worker, f"annotated {placement(job)}, mirror on {worker}"
            assert_clean_mirror(mirror, job)
            assert_status_matches(job, mirror)
            ever = relay.mirror_uids(uid)
            assert len(ever) == 1, f"{len(ever)} mirrors were created: {sorted(ever)}"
            regressions = versions_problems(relay.jobs.versions(uid), settled=worker)
            assert not regressions, f"went backwards: {regressions}"
        except AssertionError as error:
            problems.append(f"{name}: {error}")
    unexpected = set(mirrors) - set(uids.values())
    assert not unexpected, f"mirrors of unknown Jobs on the workers: {unexpected}"
    gaps = {worker: recorder.relists for worker, recorder in relay.worker_jobs.items()}
    assert not problems, (
        f"{len(problems)} of {JOB_COUNT} Jobs are wrong (watch relists, during which a short-"
        f"lived mirror could be missed: {gaps}):\n" + "\n".join(problems[:20])
    )


async def wait_all_finished(relay: Relay, count: int) -> dict[str, Obj]:
    deadline = time.monotonic() + FINISH_TIMEOUT
    while True:
        listed = await relay.manager.list(JOBS, namespace=relay.namespace)
        jobs = {job["metadata"]["name"]: job for job in listed.items}
        pending = sorted(name for name, job in jobs.items() if not finished(job))
        if len(jobs) >= count and not pending:
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{len(pending)} of {len(jobs)} Jobs unfinished after {FINISH_TIMEOUT:.0f}s, e.g. "
                + ", ".join(f"{name}: {jobs[name].get('status')}" for name in pending[:5])
            )
        await asyncio.sleep(1.0)


async def mirrors_by_origin(relay: Relay) -> dict[str, list[tuple[str, Obj]]]:
    """Every Job now on the workers in the namespace, by the origin uid it claims."""
    found: dict[str, list[tuple[str, Obj]]] = defaultdict(list)
    for worker in relay.workers:
        listed = await relay.clients[worker].list(JOBS, namespace=relay.namespace)
        for job in listed.items:
            origin = (job["metadata"].get("labels") or {}).get(ORIGIN_UID_LABEL, "")
            assert origin, f"a Job without origin on {worker}: {job['metadata']['name']}"
            found[origin].append((worker, job))
    return found
