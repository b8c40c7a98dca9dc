"""Jobs that move while they run: counters carried over and added up, only what remains run.

A Job moves mid-run in three ways, each tested here against the real fleet:

* its mirror is deleted by hand on its worker (``MirrorVanished``): a new mirror
  runs on the same worker, with what the deleted one did carried over;
* its worker is drained with ``jobrelay clusters drain NAME --force``
  (``spec.drain: All``): the mirror is deleted (pods first), and the Job runs
  on the other worker, counters carried over;
* its worker stops answering for longer than the lost timeout (``WorkerLost``,
  ``Redispatched``): the Job runs on the other worker, and when the lost worker
  answers again its stale mirrors are deleted at once and their status never
  copied. The worker is lost in two ways: its apiserver frozen (SIGSTOP), or
  jobrelay cut off from it (its kubeconfig Secret pointing at a closed port)
  while the worker runs on and the stale mirror finishes there.

Editing the placement annotation by hand moves nothing: it is set back
(``PlacementRestored``), and no second mirror is ever made.

One test per Job shape (NonIndexed with completions, Indexed,
backoffLimitPerIndex, successPolicy, podFailurePolicy, and a NonIndexed Job
that moves after two failures). Each judges the controller by what the
apiservers recorded: every version of the management Job the manager accepted
(never backwards, terminal conditions sticky, the first ``startTime`` kept,
the placement history only growing), every mirror of every run (its run
number and the record of earlier runs it was created with), and every pod
created on every worker. The module fixtures fail a test whose stretch of the
controller's log holds a 422 or a traceback.

A drained or cordoned worker is uncordoned, a frozen apiserver thawed and a
changed Secret restored (and each worker waited for until its WorkerCluster
shows Connected=True again), whatever happens, so that the modules after this
one see a healthy fleet.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from jobrelay.fleet import maintenance, maintenance_rules, workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, PODS, SECRETS, WORKER_CLUSTERS
from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    CLUSTER_ANNOTATION,
    PLACEMENTS_ANNOTATION,
    REDISPATCH_ANNOTATION,
    RUN_ANNOTATION,
)
from tests.conftest import FleetHandle
from tests.e2e.support import (
    CONTROLLER_UID_LABEL,
    ControllerProcess,
    Relay,
    apiserver_record,
    assert_clean_mirror,
    assert_finished_status_is_sound,
    frozen,
    placement,
)
from tests.kubetools import Obj, WatchRecorder, condition, eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

# Probed every second; declared lost 15 s after it stops answering.
LOST_TIMEOUT = 15
CONTROLLER_ARGS = ("--worker-health-timeout", "6", "--worker-lost-timeout", str(LOST_TIMEOUT))
# Lost, then moved: well before the 60 s resync would bring a forgotten Job back.
MOVED_WITHIN = LOST_TIMEOUT + 20

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
FAIL = {"fleet.jobrelay.dev/outcome": "fail"}
TERMINAL_CONDITIONS = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")


def lasting(duration: str, **more: str) -> dict[str, str]:
    """KWOK pod fate: run for ``duration``, then end as ``more`` says (default: succeed)."""
    return {"fleet.jobrelay.dev/duration": duration, **more}


# -- what the apiservers recorded -------------------------------------------------------


def index_set(text: str | None) -> set[int]:
    """``"0,2-4"`` -> {0, 2, 3, 4} (the Job API's index list; parsed here, not by jobrelay)."""
    found: set[int] = set()
    for item in (text or "").split(","):
        if not item:
            continue
        first, _, last = item.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def placements(job: Mapping[str, Any]) -> list[str]:
    text = (job.get("metadata", {}).get("annotations") or {}).get(PLACEMENTS_ANNOTATION) or ""
    return [name for name in text.split(",") if name]


def status_regressions(versions: Sequence[Obj]) -> list[str]:
    """What went backwards over the recorded versions of one management Job.

    ``succeeded`` and ``failed`` never decrease, ``completedIndexes`` and
    ``failedIndexes`` never lose an index (every failing index here fails for
    good), terminal conditions stay True, ``startTime`` and ``completionTime``
    never change once set, and the placement history only grows at its end.
    """
    problems: list[str] = []
    best = {"succeeded": 0, "failed": 0}
    indexes: dict[str, set[int]] = {"completedIndexes": set(), "failedIndexes": set()}
    terminal: set[str] = set()
    fixed: dict[str, str] = {}
    history: list[str] = []
    for version in versions:
        status = version.get("status") or {}
        rv = version["metadata"].get("resourceVersion")
        for counter, before in best.items():
            value = status.get(counter) or 0
            if value < before:
                problems.append(f"rv {rv}: {counter} went from {before} to {value}")
            best[counter] = max(before, value)
        for field, before_set in indexes.items():
            now = index_set(status.get(field))
            if not before_set <= now:
                problems.append(f"rv {rv}: {field} lost {sorted(before_set - now)}")
            indexes[field] = before_set | now
        for kind in TERMINAL_CONDITIONS:
            if is_true(version, kind):
                terminal.add(kind)
            elif kind in terminal:
                problems.append(f"rv {rv}: {kind}=True disappeared")
        for field in ("startTime", "completionTime"):
            value = status.get(field)
            if field in fixed and value != fixed[field]:
                problems.append(f"rv {rv}: {field} changed from {fixed[field]} to {value}")
            elif value:
                fixed[field] = value
        now_history = placements(version)
        if now_history[: len(history)] != history:
            problems.append(f"rv {rv}: placements went from {history} to {now_history}")
        history = max(history, now_history, key=len)
    return problems


def counted(mirror: Mapping[str, Any]) -> dict[str, int]:
    """A mirror's succeeded and failed pods, those not yet counted by its controller included."""
    status = mirror.get("status") or {}
    uncounted = status.get("uncountedTerminatedPods") or {}
    return {
        field: int(status.get(field) or 0) + len(uncounted.get(field) or [])
        for field in ("succeeded", "failed")
    }


def shows_at_rest(version: Mapping[str, Any], carried: Mapping[str, Any], *, indexed: bool) -> bool:
    """Whether a management Job version shows exactly the ``carried`` record, no pod running."""
    status = version.get("status") or {}
    if any(status.get(gauge) for gauge in ("active", "ready", "terminating")):
        return False
    fields = ("failed", "completedIndexes", "failedIndexes") if indexed else ("succeeded", "failed")
    return all(
        index_set(status.get(field)) == index_set(carried.get(field))
        if field.endswith("Indexes")
        else (status.get(field) or 0) == carried.get(field, 0)
        for field in fields
    )


@dataclass
class Run:
    """One mirror of a management Job, as its worker's watch recorded it."""

    worker: str
    uid: str
    number: int  # its jobrelay.dev/run
    carried: dict[str, Any]  # its jobrelay.dev/carried-over record
    first: Obj
    last: Obj  # the last version seen (the DELETED event's object once deleted)
    deleted: bool

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.last.get("status") or {})


def runs_of(relay: Relay, uid: str) -> list[Run]:
    """Every mirror ever created for the management Job ``uid``, in order.

    By run number; mirrors of one run (a vanished one and the one that replaced it,
    on the same worker) in the order their worker's watch saw them.
    """
    found: list[tuple[int, int, Run]] = []
    for worker, versions in relay.mirror_versions(uid).items():
        by_uid: dict[str, list[Obj]] = {}
        for version in versions:  # in the order the watch delivered them
            by_uid.setdefault(version["metadata"]["uid"], []).append(version)
        for order, (mirror_uid, seen) in enumerate(by_uid.items()):
            annotations = seen[0]["metadata"].get("annotations") or {}
            run = Run(
                worker=worker,
                uid=mirror_uid,
                number=int(annotations.get(RUN_ANNOTATION) or 0),
                carried=json.loads(annotations.get(CARRIED_OVER_ANNOTATION) or "{}"),
                first=seen[0],
                last=seen[-1],
                deleted=relay.worker_jobs[worker].deleted(mirror_uid),
            )
            found.append((run.number, order, run))
    return [run for _, _, run in sorted(found, key=lambda item: item[:2])]


class PodWatch:
    """Every pod of a Job ever created on every worker of the test's namespace."""

    def __init__(self, clients: Mapping[str, ApiClient], workers: Sequence[str], namespace: str):
        self.recorders = {
            worker: WatchRecorder(
                clients[worker], PODS, namespace=namespace, label_selector=JOB_NAME_LABEL
            )
            for worker in workers
        }

    def pods(self, *, worker: str | None = None, mirror_uid: str | None = None) -> list[Obj]:
        """The last version of each pod, optionally only those on ``worker`` or of a mirror."""
        found = []
        for name, recorder in self.recorders.items():
            if worker is not None and name != worker:
                continue
            for pod in recorder.objects().values():
                labels = pod["metadata"].get("labels") or {}
                if mirror_uid is None or labels.get(CONTROLLER_UID_LABEL) == mirror_uid:
                    found.append(pod)
        return found

    def of_job(self, name: str) -> dict[str, int]:
        """How many pods of the Job ``name`` each worker created."""
        return {
            worker: sum(
                1
                for pod in recorder.objects().values()
                if (pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) == name
            )
            for worker, recorder in self.recorders.items()
        }


@pytest.fixture
async def pod_watch(relay: Relay, clients: dict[str, ApiClient]) -> AsyncIterator[PodWatch]:
    watch = PodWatch(clients, relay.workers, relay.namespace)
    for recorder in watch.recorders.values():
        await recorder.start()
    try:
        yield watch
    finally:
        for recorder in watch.recorders.values():
            await recorder.stop()


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        yield client


# -- moving a Job ---------------------------------------------------------------------


async def delete_mirror_by_hand(relay: Relay, name: str) -> Run:
    """Delete the current mirror of ``name`` on its worker, as a person with kubectl would."""
    job = await relay.get(name)
    worker = placement(job)
    assert worker, f"{name} is not placed"
    current = runs_of(relay, job["metadata"]["uid"])[-1]
    assert current.worker == worker and not current.deleted, (current.worker, worker)
    relay.controller.mark(f"deleting the mirror of {name} on {worker} by hand")
    # kubectl's default: the pods go too (the API's default for Jobs would orphan them).
    await relay.clients[worker].delete(
        JOBS, name, namespace=relay.namespace, propagation_policy="Background", uid=current.uid
    )
    return current


async def set_worker_spec(
    manager: ApiClient, worker: str, patch: Mapping[str, Any], *, timeout: float = 30.0
) -> None:
    """Patch the WorkerCluster's spec as `jobrelay clusters` does, and wait until the
    controller has seen it (its status reports that generation as observed)."""
    stored = await maintenance.patch_spec(manager, worker, patch)
    generation = int(stored["metadata"]["generation"])

    async def observed() -> bool:
        seen = (await worker_status(manager, worker)).get("observedGeneration")
        return isinstance(seen, int) and seen >= generation

    await eventually(observed, timeout=timeout, what=f"{worker}: spec {patch} observed")


async def uncordon(manager: ApiClient, worker: str) -> None:
    """Uncordon (and undrain) in a ``finally``: a later test finds the fleet whole."""
    with contextlib.suppress(AssertionError):  # not seen in time: only later moves are slower
        await set_worker_spec(manager, worker, maintenance_rules.uncordon_patch())


@contextlib.asynccontextmanager
async def force_drained(manager: ApiClient, worker: str) -> AsyncIterator[None]:
    """The worker drained for the block as `jobrelay clusters drain WORKER --force` asks
    (cordoned, ``spec.drain: All``); uncordoned after, always."""
    try:
        await maintenance.start_drain(manager, worker, maintenance_rules.DrainMode.ALL)
        yield
    finally:
        await uncordon(manager, worker)


@contextlib.asynccontextmanager
async def cordoned(manager: ApiClient, workers: Sequence[str]) -> AsyncIterator[None]:
    """The workers cordoned for the block (nothing new is placed there, once the controller
    has seen it); uncordoned after, always."""
    try:
        for worker in workers:
            await set_worker_spec(manager, worker, maintenance_rules.cordon_patch())
        yield
    finally:
        for worker in workers:
            await uncordon(manager, worker)


@contextlib.asynccontextmanager
async def partitioned(
    manager: ApiClient, worker: str
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """jobrelay cut off from the worker, which itself runs on: its kubeconfig Secret
    points at a closed port (127.0.0.1:1) until the ``heal`` this yields is awaited,
    or the block ends. The test still reaches the worker with its own client."""
    registration = await manager.get(WORKER_CLUSTERS, worker)
    ref = registration["spec"]["kubeconfigSecretRef"]
    name, key = ref["name"], ref.get("key") or workerclusters.SECRET_KEY
    secret = await manager.get(SECRETS, name, namespace=workerclusters.DEFAULT_NAMESPACE)
    original = secret["data"][key]
    kubeconfig = yaml.safe_load(base64.b64decode(original))
    for entry in kubeconfig["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:1"
    healed = False

    async def write(data: str) -> None:
        await manager.patch(
            SECRETS, name, {"data": {key: data}}, namespace=workerclusters.DEFAULT_NAMESPACE
        )

    async def heal() -> None:
        nonlocal healed
        if not healed:
            await write(original)
            healed = True

    await write(base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode())
    try:
        yield heal
    finally:
        await heal()


async def worker_status(manager: ApiClient, worker: str) -> dict[str, Any]:
    return dict((await manager.get(WORKER_CLUSTERS, worker)).get("status") or {})


async def wait_worker_connected(manager: ApiClient, worker: str, *, timeout: float) -> None:
    async def back() -> bool:
        found = await manager.get(WORKER_CLUSTERS, worker)
        return is_true(found, "Connected") and not (found.get("status") or {}).get("lostTime")

    await eventually(back, timeout=timeout, interval=0.5, what=f"{worker} Connected=True again")


# -- the checks every moved Job passes -----------------------------------------------------


@dataclass
class Moved:
    job: Obj
    runs: list[Run]

    @property
    def final(self) -> Run:
        return self.runs[-1]


async def verify_moved(
    relay: Relay,
    name: str,
    *,
    runs: Sequence[tuple[int, str]],
    outcome: str,
    reason: str,
    timeout: float = 90.0,
) -> Moved:
    """Wait for ``name`` to end, then check it and every run it had.

    - ``outcome`` with ``reason``, a sound finished status;
    - exactly the mirrors ``runs`` lists (run number, worker), in that order:
      a move to another worker is a new run, a mirror that vanished is
      replaced within its run; the placement history lists each run's worker;
      every mirror is deleted in the end;
    - the final status is what the earlier runs did plus what the last mirror
      did: ``succeeded`` (NonIndexed), ``failed``, ``completedIndexes`` and
      ``failedIndexes`` (unions), the first ``startTime``, the last mirror's
      ``completionTime``;
    - no version of the management Job went backwards, and the first version
      placed on a new worker shows no running pods.
    """
    job = await relay.wait_finished(name, timeout=timeout)
    status = job.get("status") or {}
    assert is_true(job, outcome), f"{name}: expected {outcome}=True, got {status}"
    found = condition(job, outcome) or {}
    assert found.get("reason") == reason, f"{name}: {outcome} condition: {found}"
    assert_finished_status_is_sound(job)
    uid = job["metadata"]["uid"]
    workers = list(dict(runs).values())  # each run's worker, in run order
    assert placements(job) == workers, f"{name}: placements {placements(job)}"
    assert placement(job) == workers[-1], f"{name}: {CLUSTER_ANNOTATION} = {placement(job)}"

    await relay.wait_mirror_gone(uid, timeout=30)
    mirrors = runs_of(relay, uid)
    seen = [(run.number, run.worker, run.uid) for run in mirrors]
    assert [(run.number, run.worker) for run in mirrors] == list(runs), f"{name}: mirrors {seen}"
    for run in mirrors:
        shown = {k: v for k, v in run.status.items() if k not in ("conditions", "startTime")}
        print(f"{name}: run {run.number} on {run.worker} carried {run.carried}, ended {shown}")
    first, final = mirrors[0], mirrors[-1]
    assert first.carried == {}, f"{name}: the first run carried {first.carried}"
    assert all(run.deleted for run in mirrors), f"{name}: a mirror was left behind"
    assert_clean_mirror(final.last, job)
    assert is_true(final.last, outcome), f"{name}: its last mirror did not end {outcome}"

    carried, theirs = final.carried, final.status
    indexed = job["spec"].get("completionMode") == "Indexed"
    assert status.get("failed", 0) == carried.get("failed", 0) + theirs.get("failed", 0), (
        f"{name}: failed {status.get('failed')} != carried {carried} + last run's {theirs}"
    )
    if indexed:
        completed = index_set(carried.get("completedIndexes")) | index_set(
            theirs.get("completedIndexes")
        )
        assert index_set(status.get("completedIndexes")) == completed, (status, carried, theirs)
        failed = index_set(carried.get("failedIndexes")) | index_set(theirs.get("failedIndexes"))
        assert index_set(status.get("failedIndexes")) == failed - completed, (status, carried)
    else:
        assert status.get("succeeded", 0) == carried.get("succeeded", 0) + theirs.get(
            "succeeded", 0
        ), f"{name}: succeeded {status.get('succeeded')} != carried {carried} + {theirs}"
    assert status["startTime"] == first.status.get("startTime"), (
        f"{name}: startTime {status['startTime']} is not the first run's "
        f"{first.status.get('startTime')}"
    )
    if outcome == "Complete":
        assert status["completionTime"] == theirs.get("completionTime"), (status, theirs)

    versions = relay.jobs.versions(uid)
    problems = status_regressions(versions)
    assert not problems, f"{name}: management Job went backwards: {problems}"
    for count in range(2, len(workers) + 1):
        moved = next(v for v in versions if len(placements(v)) == count)
        gauges = {g: (moved.get("status") or {}).get(g) or 0 for g in ("active", "ready")}
        assert gauges == {"active": 0, "ready": 0}, (
            f"{name}: placed on {workers[count - 1]} while still showing running pods: {gauges}"
        )
    for later in mirrors[1:]:
        # Between two mirrors the manager showed the record the next one was made with,
        # and no running pods.
        at_rest = [v for v in versions if shows_at_rest(v, later.carried, indexed=indexed)]
        assert at_rest, (
            f"{name}: no version shows {later.carried} with no running pods before run "
            f"{later.number} on {later.worker}: {[v.get('status') for v in versions]}"
        )
    for worker in dict.fromkeys(workers):
        await relay.assert_dispatched_event(job, worker)
    return Moved(job, mirrors)


def assert_carried_exactly(moved: Moved, name: str) -> None:
    """Each run after the first carries what the runs before it counted, no more, no less."""
    for before, after in zip(moved.runs, moved.runs[1:], strict=False):
        expected = {
            field: before.carried.get(field, 0) + counted(before.last)[field]
            for field in ("succeeded", "failed")
        }
        got = {field: after.carried.get(field, 0) for field in expected}
        if moved.job["spec"].get("completionMode") == "Indexed":
            expected.pop("succeeded")
            got.pop("succeeded")
            done = index_set(before.carried.get("completedIndexes")) | index_set(
                before.status.get("completedIndexes")
            )
            assert done <= index_set(after.carried.get("completedIndexes")), (
                f"{name}: run {after.number} carried {after.carried}, run {before.number} "
                f"had completed {sorted(done)}"
            )
        assert got == expected, (
            f"{name}: run {after.number} carried {after.carried}; run {before.number} "
            f"(carrying {before.carried}) ended with {before.status}"
        )


async def wait_event(
    relay: Relay, uid: str, kind: str, reason: str, text: str = "", *, timeout: float = 60.0
) -> Obj:
    return await relay.wait_event(
        uid,
        lambda e: e.get("type") == kind and e.get("reason") == reason
        and text in (e.get("message") or ""),
        timeout=timeout,
        what=f"a {kind} {reason} Event" + (f" naming {text}" if text else ""),
    )  # fmt: skip


def status_of(job: Mapping[str, Any]) -> dict[str, Any]:
    return dict(job.get("status") or {})


def running(job: Mapping[str, Any]) -> bool:
    return not any(is_true(job, kind) for kind in TERMINAL_CONDITIONS)


# -- one re-dispatch per Job shape ------------------------------------------------------


async def test_nonindexed_job_drained_mid_run_runs_only_the_remaining_completions(
    relay: Relay, pod_watch: PodWatch, manager: ApiClient
) -> None:
    completions, parallelism = 6, 2
    created = await relay.submit(
        job_manifest(
            "six", completions=completions, parallelism=parallelism, annotations=lasting("3s")
        )
    )
    uid = created["metadata"]["uid"]
    first = await relay.wait_placed("six")
    second = next(worker for worker in relay.workers if worker != first)
    await relay.wait(
        "six", lambda job: status_of(job).get("succeeded", 0) >= 2 and running(job),
        timeout=60, what="2 completions copied, still running",
    )  # fmt: skip
    async with force_drained(manager, first):
        await wait_event(relay, uid, "Normal", "Redispatched", second)
        await relay.wait_placed("six")
    moved = await verify_moved(
        relay,
        "six",
        runs=[(1, first), (2, second)],
        outcome="Complete",
        reason="CompletionsReached",
    )
    assert_carried_exactly(moved, "six")
    assert moved.job["status"]["succeeded"] == completions
    earlier = moved.runs[0]
    done_before = moved.final.carried.get("succeeded", 0)
    assert 2 <= done_before < completions, moved.final.carried
    assert moved.final.first["spec"]["completions"] == completions - done_before
    assert moved.final.first["spec"]["parallelism"] == min(parallelism, completions - done_before)
    # Pods: the second run made only the remaining ones; the first made its completions
    # plus at most the pods that were running when it was moved.
    pods = pod_watch.of_job("six")
    second_run = len(pod_watch.pods(mirror_uid=moved.final.uid))
    first_run = len(pod_watch.pods(mirror_uid=earlier.uid))
    assert second_run == pods[second] == completions - done_before, (pods, second_run)
    in_flight = first_run - done_before
    assert 0 <= in_flight <= parallelism, (first_run, done_before)
    assert sum(pods.values()) == completions + in_flight, pods


async def test_indexed_job_whose_mirror_vanishes_completes_every_index(
    relay: Relay, pod_watch: PodWatch
) -> None:
    created = await relay.submit(
        job_manifest(
            "indexed", completions=4, parallelism=2, completionMode="Indexed",
            annotations=lasting("4s"),
        )
    )  # fmt: skip
    uid = created["metadata"]["uid"]
    worker = await relay.wait_placed("indexed")
    await relay.wait(
        "indexed", lambda job: bool(status_of(job).get("completedIndexes")) and running(job),
        timeout=60, what="a completed index copied, still running",
    )  # fmt: skip
    gone = await delete_mirror_by_hand(relay, "indexed")
    await wait_event(relay, uid, "Warning", "MirrorVanished", worker)
    moved = await verify_moved(
        relay,
        "indexed",
        runs=[(1, worker), (1, worker)],
        outcome="Complete",
        reason="CompletionsReached",
    )
    assert_carried_exactly(moved, "indexed")
    assert moved.job["status"]["completedIndexes"] == "0-3"
    assert moved.job["status"]["succeeded"] == 4
    assert index_set(moved.final.carried.get("completedIndexes")) >= index_set(
        gone.status.get("completedIndexes")
    )
    # An Indexed mirror cannot be told to skip indexes: the new run runs them all.
    assert moved.final.first["spec"]["completions"] == 4
    assert len(pod_watch.pods(mirror_uid=moved.final.uid)) == 4


async def test_backoff_limit_per_index_job_drained_mid_run_adds_up_failed_indexes(
    relay: Relay, pod_watch: PodWatch, manager: ApiClient
) -> None:
    # One pod at a time, each index failing for good at its first failure: index 0 has
    # failed when the Job moves, index 1 is running.
    created = await relay.submit(
        job_manifest(
            "per-index", completions=3, parallelism=1, backoff_limit=100,
            completionMode="Indexed", backoffLimitPerIndex=0,
            annotations=lasting("2s", **FAIL),
        )
    )  # fmt: skip
    uid = created["metadata"]["uid"]
    first = await relay.wait_placed("per-index")
    second = next(worker for worker in relay.workers if worker != first)
    await relay.wait(
        "per-index", lambda job: bool(status_of(job).get("failedIndexes")) and running(job),
        timeout=60, what="a failed index copied, still running",
    )  # fmt: skip
    async with force_drained(manager, first):
        await wait_event(relay, uid, "Normal", "Redispatched", second)
        await relay.wait_placed("per-index")
    moved = await verify_moved(
        relay, "per-index", runs=[(1, first), (2, second)], outcome="Failed", reason="FailedIndexes"
    )
    assert_carried_exactly(moved, "per-index")
    carried = moved.final.carried
    assert carried.get("failedIndexes") and carried.get("failed", 0) >= 1, carried
    status = moved.job["status"]
    assert status["failedIndexes"] == "0-2", status
    assert not status.get("completedIndexes"), status
    failing = pod_watch.pods(mirror_uid=moved.final.uid)
    assert status["failed"] == carried["failed"] + len(failing), (status, carried, len(failing))


async def test_success_policy_job_whose_mirror_vanishes_completes_by_its_policy(
    relay: Relay, pod_watch: PodWatch
) -> None:
    # Index 3 decides; it runs in the second wave, so the first wave has completed
    # when the mirror is deleted and the policy is not met yet.
    created = await relay.submit(
        job_manifest(
            "policy", completions=4, parallelism=2, completionMode="Indexed",
            successPolicy={"rules": [{"succeededIndexes": "3"}]},
            annotations=lasting("4s"),
        )
    )  # fmt: skip
    uid = created["metadata"]["uid"]
    worker = await relay.wait_placed("policy")
    await relay.wait(
        "policy", lambda job: bool(status_of(job).get("completedIndexes")) and running(job),
        timeout=60, what="a completed index copied, policy not met yet",
    )  # fmt: skip
    gone = await delete_mirror_by_hand(relay, "policy")
    await wait_event(relay, uid, "Warning", "MirrorVanished", worker)
    moved = await verify_moved(
        relay, "policy", runs=[(1, worker), (1, worker)], outcome="Complete", reason="SuccessPolicy"
    )
    assert_carried_exactly(moved, "policy")
    met = condition(moved.job, "SuccessCriteriaMet") or {}
    assert (met.get("status"), met.get("reason")) == ("True", "SuccessPolicy"), met
    done = index_set(moved.job["status"].get("completedIndexes"))
    assert 3 in done and index_set(gone.status.get("completedIndexes")) <= done, (done, gone.status)
    assert not is_true(gone.last, "SuccessCriteriaMet"), "the policy was met before the move"


async def test_pod_failure_policy_job_drained_mid_run_fails_by_its_policy(
    relay: Relay, pod_watch: PodWatch, manager: ApiClient
) -> None:
    created = await relay.submit(
        job_manifest(
            "exit42", backoff_limit=5,
            annotations=lasting("8s", **FAIL, **{"fleet.jobrelay.dev/exit-code": "42"}),
            podFailurePolicy={
                "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
            },
        )
    )  # fmt: skip
    uid = created["metadata"]["uid"]
    first = await relay.wait_placed("exit42")
    second = next(worker for worker in relay.workers if worker != first)
    await relay.wait(
        "exit42", lambda job: status_of(job).get("ready", 0) >= 1 and running(job),
        timeout=60, what="its pod running",
    )  # fmt: skip
    async with force_drained(manager, first):
        await wait_event(relay, uid, "Normal", "Redispatched", second)
        await relay.wait_placed("exit42")
    moved = await verify_moved(
        relay, "exit42", runs=[(1, first), (2, second)], outcome="Failed", reason="PodFailurePolicy"
    )
    assert_carried_exactly(moved, "exit42")
    target = condition(moved.job, "FailureTarget") or {}
    assert target.get("reason") == "PodFailurePolicy", target
    # The pod moved away from the first worker never failed there: one failure, the last run's.
    assert moved.job["status"]["failed"] == 1, moved.job["status"]
    assert len(pod_watch.pods(mirror_uid=moved.final.uid)) == 1


async def test_backoff_limit_counts_the_failures_of_a_vanished_mirror(
    relay: Relay, pod_watch: PodWatch
) -> None:
    created = await relay.submit(
        job_manifest("retried", backoff_limit=3, annotations=lasting("1s", **FAIL))
    )
    uid = created["metadata"]["uid"]
    worker = await relay.wait_placed("retried")
    # The worker waits 10 s, then 20 s, between failed pods: after the second failure
    # there is time to delete the mirror before its third pod.
    await relay.wait(
        "retried", lambda job: status_of(job).get("failed", 0) >= 2, timeout=60,
        what="2 failures copied",
    )  # fmt: skip
    gone = await delete_mirror_by_hand(relay, "retried")
    await wait_event(relay, uid, "Warning", "MirrorVanished", worker)
    moved = await verify_moved(
        relay, "retried", runs=[(1, worker), (1, worker)], outcome="Failed",
        reason="BackoffLimitExceeded",
    )  # fmt: skip
    assert_carried_exactly(moved, "retried")
    assert counted(gone.last)["failed"] == 2, gone.status
    assert moved.final.carried.get("failed") == 2, moved.final.carried
    assert moved.final.first["spec"]["backoffLimit"] == 1
    pods = pod_watch.of_job("retried")
    assert sum(pods.values()) == 4, f"failing pods per worker (at most 3 + 1, not 6): {pods}"
    assert moved.job["status"]["failed"] == 4, moved.job["status"]


# -- a lost worker ---------------------------------------------------------------------


async def test_lost_worker_jobs_move_and_its_stale_mirrors_are_deleted_when_it_returns(
    relay: Relay,
    pod_watch: PodWatch,
    fleet: FleetHandle,
    manager: ApiClient,
    controller: ControllerProcess,
) -> None:
    healthy, doomed = relay.workers[0], relay.workers[-1]
    await wait_worker_connected(manager, doomed, timeout=30)
    async with cordoned(manager, [w for w in relay.workers if w != doomed]):
        moving = await relay.submit(
            job_manifest("moving", completions=6, parallelism=2, annotations=lasting("5s"))
        )
        at_most_once = job_manifest("at-most-once", annotations=lasting("120s"))
        at_most_once["metadata"]["annotations"] = {REDISPATCH_ANNOTATION: "never"}
        once = await relay.submit(at_most_once)
        for name in ("moving", "at-most-once"):
            assert await relay.wait_placed(name) == doomed, f"{name} was placed off {doomed}"
    moving_uid, once_uid = moving["metadata"]["uid"], once["metadata"]["uid"]
    await relay.wait(
        "moving", lambda job: status_of(job).get("succeeded", 0) >= 2 and running(job),
        timeout=60, what="2 completions copied, still running",
    )  # fmt: skip
    await relay.wait_active("at-most-once")
    before_freeze = await relay.get("moving")

    record = apiserver_record(fleet.state_dir, doomed)
    stale: list[Run] = []
    try:
        with frozen(record):
            controller.mark(f"froze {doomed}'s kube-apiserver (pid {record.pid})")
            frozen_at = time.monotonic()

            async def lost_time() -> str | None:
                return (await worker_status(manager, doomed)).get("lostTime")

            await eventually(lost_time, timeout=60, interval=0.5, what=f"{doomed} lostTime")
            print(f"{doomed} declared lost {time.monotonic() - frozen_at:.1f}s after the freeze")
            for uid in (moving_uid, once_uid):
                await wait_event(relay, uid, "Warning", "WorkerLost", doomed)
            await wait_event(relay, moving_uid, "Normal", "Redispatched", healthy)
            failed = await relay.wait(
                "at-most-once", lambda job: is_true(job, "Failed"), timeout=30,
                what="Failed (it may run at most once)",
            )  # fmt: skip

            def second_run() -> Run | None:
                return next((r for r in runs_of(relay, moving_uid) if r.worker == healthy), None)

            await relay.worker_jobs[healthy].wait(second_run, timeout=30)
            stale = [runs_of(relay, uid)[0] for uid in (moving_uid, once_uid)]
            assert all(run.worker == doomed for run in stale), stale
        thawed_at = time.monotonic()
        controller.mark(f"thawed {doomed}'s kube-apiserver")

        # Back: its stale mirrors are deleted at once, whatever they show by then.
        def stale_gone() -> bool:
            return all(relay.worker_jobs[doomed].deleted(run.uid) for run in stale)

        await relay.worker_jobs[doomed].wait(stale_gone, timeout=15)
        print(f"stale mirrors on {doomed} deleted {time.monotonic() - thawed_at:.1f}s after thaw")
        await wait_worker_connected(manager, doomed, timeout=60)
    finally:  # later modules need the whole fleet (frozen() has thawed it)
        with contextlib.suppress(AssertionError):
            await wait_worker_connected(manager, doomed, timeout=60)

    # The Job that may run at most once ended where it was lost.
    assert failed["status"].get("startTime"), failed["status"]
    for kind in ("FailureTarget", "Failed"):
        found = condition(failed, kind) or {}
        assert found.get("reason") == "WorkerLost", f"at-most-once {kind}: {found}"
    assert "lost" in (condition(failed, "Failed") or {}).get("message", "").lower(), failed
    assert not status_of(failed).get("active"), failed["status"]
    assert placements(failed) == [doomed], placements(failed)
    assert len(relay.mirror_uids(once_uid)) == 1, relay.mirror_uids(once_uid)
    problems = status_regressions(relay.jobs.versions(once_uid))
    assert not problems, f"at-most-once went backwards: {problems}"

    # The Job that moved: run 2 on the healthy worker, counters added up.
    moved = await verify_moved(
        relay,
        "moving",
        runs=[(1, doomed), (2, healthy)],
        outcome="Complete",
        reason="CompletionsReached",
    )
    assert moved.job["status"]["succeeded"] == 6
    carried = moved.final.carried
    # Carried over: what the manager showed when the worker was lost, not what the stale
    # mirror may have done since.
    before_move = [v for v in relay.jobs.versions(moving_uid) if len(placements(v)) == 1][-1]
    assert (
        carried.get("succeeded", 0)
        == status_of(before_move).get("succeeded", 0)
        >= (status_of(before_freeze).get("succeeded", 0))
    ), (carried, status_of(before_move))
    assert moved.final.first["spec"]["completions"] == 6 - carried.get("succeeded", 0)
    assert len(pod_watch.pods(mirror_uid=moved.final.uid)) == 6 - carried.get("succeeded", 0)
    # Never a status of the stale mirror: after the move, every version the manager
    # accepted is the carried record plus one the new mirror had.
    new_run_values = {
        carried.get("succeeded", 0) + int((v.get("status") or {}).get("succeeded") or 0)
        for v in relay.mirror_versions(moving_uid)[healthy]
    } | {carried.get("succeeded", 0)}
    after_move = [v for v in relay.jobs.versions(moving_uid) if len(placements(v)) == 2]
    shown = {int((v.get("status") or {}).get("succeeded") or 0) for v in after_move}
    assert shown <= new_run_values, (
        f"succeeded values after the move {sorted(shown)} include some the new mirror never "
        f"had ({sorted(new_run_values)}): the stale mirror's status was copied"
    )
    stale_moving = runs_of(relay, moving_uid)[0]
    print(f"the stale mirror's last status on {doomed}: {stale_moving.status}")


async def test_a_mirror_that_finished_on_a_lost_worker_is_deleted_and_never_copied(
    relay: Relay, pod_watch: PodWatch, manager: ApiClient, controller: ControllerProcess
) -> None:
    # A network partition: the worker runs on, its mirror finishes there while jobrelay
    # cannot see it, and the Job has moved by then. When the worker is reachable again,
    # that finished mirror is a stale run: deleted, its status never copied.
    healthy, parted = relay.workers[0], relay.workers[-1]
    await wait_worker_connected(manager, parted, timeout=30)
    async with cordoned(manager, [w for w in relay.workers if w != parted]):
        created = await relay.submit(
            job_manifest("parted", completions=2, parallelism=2, annotations=lasting("10s"))
        )
        assert await relay.wait_placed("parted") == parted
    uid = created["metadata"]["uid"]
    await relay.wait(
        "parted", lambda job: status_of(job).get("ready", 0) == 2, timeout=60,
        what="both pods running",
    )  # fmt: skip
    try:
        async with partitioned(manager, parted) as heal:
            controller.mark(f"cut jobrelay off {parted}")
            await wait_event(relay, uid, "Normal", "Redispatched", healthy, timeout=MOVED_WITHIN)
            await wait_event(relay, uid, "Warning", "WorkerLost", parted)

            def stale_finished_and_new_run() -> tuple[Run, Run] | None:
                runs = runs_of(relay, uid)
                if len(runs) == 2 and is_true(runs[0].last, "Complete"):
                    return runs[0], runs[1]
                return None

            stale, new = await relay.worker_jobs[healthy].wait(
                stale_finished_and_new_run, timeout=30
            )
            assert (stale.worker, new.worker) == (parted, healthy), (stale.worker, new.worker)
            assert not is_true(new.last, "Complete"), "the new run ended before the check began"
            controller.mark(f"jobrelay reaches {parted} again")
            healed_at = time.monotonic()
            await heal()

            def stale_gone() -> bool:
                return relay.worker_jobs[parted].deleted(stale.uid)

            await relay.worker_jobs[parted].wait(stale_gone, timeout=15)
            print(f"stale mirror on {parted} deleted {time.monotonic() - healed_at:.1f}s after")
    finally:
        with contextlib.suppress(AssertionError):
            await wait_worker_connected(manager, parted, timeout=60)

    moved = await verify_moved(
        relay, "parted", runs=[(1, parted), (2, healthy)], outcome="Complete",
        reason="CompletionsReached",
    )  # fmt: skip
    stale = moved.runs[0]
    stale_end = stale.status
    assert stale_end.get("succeeded") == 2 and stale_end.get("completionTime"), stale_end
    # Nothing of the finished stale run reached the management Job: it completed when
    # the new run did, with its completion time, and every count is the new run's.
    assert moved.job["status"]["completionTime"] != stale_end["completionTime"]
    carried = moved.final.carried.get("succeeded", 0)
    assert moved.job["status"]["succeeded"] == 2 == carried + moved.final.status["succeeded"]
    new_run_values = {
        carried + int((v.get("status") or {}).get("succeeded") or 0)
        for v in relay.mirror_versions(uid)[healthy]
    } | {carried}
    after_move = [v for v in relay.jobs.versions(uid) if len(placements(v)) == 2]
    shown = {int((v.get("status") or {}).get("succeeded") or 0) for v in after_move}
    assert shown <= new_run_values, (shown, new_run_values)


# -- the placement annotation belongs to jobrelay -----------------------------------------


async def test_hand_edited_placement_is_restored_and_never_starts_a_second_mirror(
    relay: Relay, pod_watch: PodWatch
) -> None:
    names = {"edited": "other", "unplaced": None}  # moved to the other worker, or removed
    created = {
        name: await relay.submit(job_manifest(name, annotations=lasting("6s"))) for name in names
    }
    placed = {name: await relay.wait_placed(name) for name in names}
    for name, edit in names.items():
        await relay.wait_active(name)
        other = next(worker for worker in relay.workers if worker != placed[name])
        value = other if edit == "other" else None
        relay.controller.mark(f"setting {CLUSTER_ANNOTATION} of {name} to {value}")
        await relay.manager.patch(
            JOBS, name, {"metadata": {"annotations": {CLUSTER_ANNOTATION: value}}},
            namespace=relay.namespace,
        )  # fmt: skip
    for name in names:
        uid = created[name]["metadata"]["uid"]
        await wait_event(relay, uid, "Warning", "PlacementRestored", placed[name])

        def restored(job: Obj, worker: str = placed[name]) -> bool:
            return placement(job) == worker

        await relay.wait(
            name, restored, timeout=30, what=f"{CLUSTER_ANNOTATION} set back to {placed[name]}"
        )
    for name in names:
        job = await relay.wait_finished(name, timeout=60)
        assert is_true(job, "Complete"), job["status"]
        uid = job["metadata"]["uid"]
        assert placement(job) == placed[name] and placements(job) == [placed[name]], job["metadata"]
        runs = runs_of(relay, uid)
        assert [(run.number, run.worker) for run in runs] == [(1, placed[name])], runs
        for worker in relay.workers:
            if worker != placed[name]:
                assert relay.jobs_named(name, worker) == [], f"a {name} appeared on {worker}"
                assert pod_watch.of_job(name)[worker] == 0
        problems = status_regressions(relay.jobs.versions(uid))
        assert not problems, f"{name} went backwards: {problems}"
        assert job["status"]["succeeded"] == 1
