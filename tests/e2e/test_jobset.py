"""JobSets (jobset.x-k8s.io/v1alpha2) are relayed by their dedicated adapter.

The local fleet runs the real JobSet controller on every cluster: on the
manager it leaves JobSets with ``spec.managedBy: jobrelay.dev/relay`` alone, so
their child Jobs must only ever exist on the worker that holds the mirror. The
tests watch, from before anything is created, the JobSets of the test's
namespace on every cluster and the Jobs of that namespace on every cluster
(manager included), so they can tell how many mirrors and child Jobs were
ever created, and check every version of a management JobSet for regressions:
``restarts`` never decreases, a True terminal condition stays, and within one
``restarts`` count no replicated job's ``succeeded`` or ``failed`` decreases.

The manifests are complete (success policy, completion mode, restart policy,
network), so nothing depends on JobSet's defaulting webhook.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS, JOBS, PODS
from tests.e2e.support import (
    ControllerProcess,
    Relay,
    assert_dispatched_once_and_cleaned,
    assert_origin_marks,
    finished_on_its_worker,
    outlast,
    placement,
)
from tests.kubetools import Obj, WatchRecorder, condition, eventually, is_true

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e

JOBSETS = JobSetKind.ref
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
CONTROLLER_ARGS = ["--kind", "Job.v1.batch", "--kind", JobSetKind.ref.name]
TERMINAL = ("Completed", "Failed")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
COUNTERS = ("active", "ready", "succeeded", "failed", "suspended")


def jobset_manifest(
    name: str,
    *,
    duration: str = "2s",
    outcome: str | None = None,
    replicas: int = 2,
    parallelism: int = 2,
    leader: bool = True,
    **spec: Any,
) -> Obj:
    """A JobSet of a one-pod ``leader`` and ``replicas`` Jobs ``workers`` of ``parallelism``
    pods each, run by KWOK for ``duration`` (``outcome``: fail, run-forever)."""

    def replicated(job_name: str, count: int, pods: int) -> Obj:
        annotations = {"fleet.jobrelay.dev/duration": duration}
        if outcome:
            annotations["fleet.jobrelay.dev/outcome"] = outcome
        return {
            "name": job_name,
            "replicas": count,
            "template": {
                "spec": {
                    "parallelism": pods,
                    "completions": pods,
                    "completionMode": "Indexed",
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "100m"}},
                                }
                            ],
                        },
                    },
                }
            },
        }

    jobs = [replicated("leader", 1, 1)] if leader else []
    jobs.append(replicated("workers", replicas, parallelism))
    return {
        "apiVersion": JOBSETS.api_version,
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"team": "e2e"}},
        "spec": {
            "successPolicy": {"operator": "All"},
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": jobs,
            **spec,
        },
    }


def jobset_finished(obj: Mapping[str, Any]) -> bool:
    return any(is_true(obj, kind) for kind in TERMINAL)


def replicated_status(obj: Mapping[str, Any], name: str) -> Obj:
    for entry in (obj.get("status") or {}).get("replicatedJobsStatus") or []:
        if entry.get("name") == name:
            return dict(entry)
    return {}


def busy(obj: Mapping[str, Any], name: str = "workers") -> bool:
    """The replicated job shows Jobs running (active or ready), and the JobSet has not ended."""
    entry = replicated_status(obj, name)
    return bool(entry.get("active") or entry.get("ready")) and not jobset_finished(obj)


# -- fixtures ----------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
async def _jobset_served(fleet: FleetHandle) -> None:
    """Fail (never skip) every test when the fleet does not serve JobSet everywhere.

    Autouse, so it runs before the ``controller`` fixture, which would fail
    less clearly (``--kind JobSet...``: the management cluster does not serve it).
    """
    missing = []
    for name in fleet.clusters:
        async with fleet.client(name) as client:
            try:
                crd = await client.get(CRDS, JOBSET_CRD)
            except ApiError as error:
                if not error.is_not_found:
                    raise
                missing.append(f"{name} (no CRD {JOBSET_CRD})")
                continue
            if not is_true(crd, "Established"):
                missing.append(f"{name} (CRD {JOBSET_CRD} not Established)")
    if missing:
        pytest.fail(
            "these JobSet e2e tests need the JobSet CRD and controller on every cluster of the "
            f"local fleet (jobrelay fleet up installs them), but they are missing on: "
            f"{', '.join(missing)}; fleet state: {fleet.state_dir}",
            pytrace=False,
        )


@pytest.fixture
async def jobsets(
    controller: ControllerProcess,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    namespace: str,
) -> AsyncIterator[Relay]:
    """Submit and observe JobSets in the test's namespace (every version, every cluster)."""
    async with Relay(
        clients,
        fleet.workers,
        namespace,
        controller,
        resource=JOBSETS,
        is_finished=jobset_finished,
    ) as relay:
        yield relay


@pytest.fixture
async def child_jobs(
    jobsets: Relay, clients: dict[str, ApiClient]
) -> AsyncIterator[dict[str, WatchRecorder]]:
    """Every Job of the test's namespace, on every cluster (the manager included)."""
    recorders = {
        name: WatchRecorder(client, JOBS, namespace=jobsets.namespace)
        for name, client in clients.items()
    }
    try:
        for recorder in recorders.values():
            await recorder.start()
        yield recorders
    finally:
        for recorder in recorders.values():
            await recorder.stop()


# -- checks ------------------------------------------------------------------------


def history_problems(versions: list[Obj]) -> list[str]:
    """What went backwards over the versions of one management JobSet the watch saw."""
    problems: list[str] = []
    restarts = 0
    terminal: set[str] = set()
    terminal_state = ""
    best: dict[tuple[int, str, str], int] = {}
    placed: str | None = None
    for version in versions:
        status = version.get("status") or {}
        rv = version["metadata"].get("resourceVersion")
        now = int(status.get("restarts") or 0)
        if now < restarts:
            problems.append(f"rv {rv}: restarts went from {restarts} to {now}")
        restarts = max(restarts, now)
        for kind in TERMINAL:
            if is_true(version, kind):
                terminal.add(kind)
            elif kind in terminal:
                problems.append(f"rv {rv}: {kind}=True disappeared")
        state = status.get("terminalState") or ""
        if terminal_state and state != terminal_state:
            problems.append(f"rv {rv}: terminalState went from {terminal_state} to {state!r}")
        terminal_state = terminal_state or state
        for entry in status.get("replicatedJobsStatus") or []:
            for counter in ("succeeded", "failed"):
                key = (now, str(entry.get("name")), counter)
                value = int(entry.get(counter) or 0)
                if value < best.get(key, 0):
                    problems.append(
                        f"rv {rv}: {entry.get('name')}.{counter} went from {best[key]} to "
                        f"{value} within restart {now}"
                    )
                best[key] = max(best.get(key, 0), value)
        cluster = placement(version)
        if placed and cluster != placed:
            problems.append(f"rv {rv}: placement changed from {placed} to {cluster}")
        placed = cluster or placed
    return problems


def status_digest(obj: Mapping[str, Any]) -> Obj:
    """What a final status says: restarts, terminal state and conditions, per-job counters."""
    status = obj.get("status") or {}
    return {
        "restarts": int(status.get("restarts") or 0),
        "terminalState": status.get("terminalState"),
        "terminal": sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in status.get("conditions") or []
            if c.get("type") in TERMINAL
        ),
        "jobs": {
            str(entry.get("name")): {c: int(entry.get(c) or 0) for c in COUNTERS}
            for entry in status.get("replicatedJobsStatus") or []
        },
    }


def copied_from(final: Mapping[str, Any], mirror_versions: list[Obj]) -> Obj | None:
    """The finished mirror version the final management status is a copy of, if any.

    JobSet's controller keeps writing a finished JobSet's counters (on failure
    they even drop, as it deletes the child Jobs), and jobrelay keeps the first
    finished status it sees: so any finished version of the mirror may be the
    source. It must match it exactly, except that ``succeeded`` and ``failed``
    may be higher (never lower) as long as the mirror showed them in that attempt.
    """
    ours = status_digest(final)
    highest: dict[tuple[int, str, str], int] = {}
    for version in mirror_versions:
        theirs = status_digest(version)
        for job, counters in theirs["jobs"].items():
            for counter in ("succeeded", "failed"):
                key = (theirs["restarts"], job, counter)
                highest[key] = max(highest.get(key, 0), counters[counter])
    for version in mirror_versions:
        theirs = status_digest(version)
        if not jobset_finished(version) or any(
            ours[key] != theirs[key] for key in ("restarts", "terminalState", "terminal")
        ):
            continue
        if set(ours["jobs"]) != set(theirs["jobs"]):
            continue
        if all(
            ours["jobs"][job][c] == theirs["jobs"][job][c]
            if c not in ("succeeded", "failed")
            else theirs["jobs"][job][c]
            <= ours["jobs"][job][c]
            <= highest[(theirs["restarts"], job, c)]
            for job in ours["jobs"]
            for c in COUNTERS
        ):
            return version
    return None


def assert_clean_mirror(mirror: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    """A plain JobSet of the worker: no managedBy nor TTL, the origin marks, the same jobs."""
    assert_origin_marks(mirror, obj)
    spec = mirror.get("spec") or {}
    assert "managedBy" not in spec, f"the mirror is managed by {spec['managedBy']}"
    assert "ttlSecondsAfterFinished" not in spec, "the worker's TTL could delete the mirror"
    assert spec["replicatedJobs"] == obj["spec"]["replicatedJobs"]
    assert spec["successPolicy"] == obj["spec"]["successPolicy"]


def mirror_child_jobs(recorder: WatchRecorder, name: str) -> dict[str, set[str]]:
    """The uids of every Job of the JobSet ``name`` ever seen, by Job name."""
    found: dict[str, set[str]] = {}
    for _, job in recorder.events:
        meta = job["metadata"]
        if (meta.get("labels") or {}).get(JOBSET_NAME_LABEL) == name:
            found.setdefault(meta["name"], set()).add(meta["uid"])
    return found


async def finished_and_cleaned(
    relay: Relay, name: str, *, outcome: str, timeout: float = 120.0
) -> tuple[Obj, str, Obj]:
    """Wait until ``name`` ended with ``outcome``; check the copy, the history and the cleanup.

    Returns the management JobSet, the worker its mirror ran on and the
    mirror's last version (recorded by the watch, as jobrelay deletes it).
    """
    obj, cluster, mirror = await finished_on_its_worker(
        relay, name, outcome=outcome, timeout=timeout
    )
    assert (obj.get("status") or {}).get("terminalState") == outcome, obj.get("status")
    uid = obj["metadata"]["uid"]
    assert_clean_mirror(mirror, obj)
    mirror_versions = relay.mirror_versions(uid)[cluster]
    assert copied_from(obj, mirror_versions) is not None, (
        f"{name}: the final status {status_digest(obj)} is no finished status of the mirror: "
        f"{[status_digest(v) for v in mirror_versions if jobset_finished(v)]}"
    )
    problems = history_problems(relay.jobs.versions(uid))
    assert not problems, f"{name}: the management JobSet went backwards: {problems}"
    await assert_dispatched_once_and_cleaned(relay, obj, cluster)
    return obj, cluster, mirror


async def assert_nothing_ran_on_the_manager(relay: Relay, jobs: WatchRecorder) -> None:
    assert jobs.events == [], f"Jobs were created on the manager: {len(jobs.events)} events"
    pods = await relay.manager.list(PODS, namespace=relay.namespace)
    assert pods.items == [], "pods of a relayed JobSet ran on the manager"


# -- tests -------------------------------------------------------------------------


async def test_jobset_is_dispatched_and_its_jobs_run_on_the_worker_only(
    jobsets: Relay, child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(jobset_manifest("train", ttlSecondsAfterFinished=600))
    uid = created["metadata"]["uid"]
    cluster = await jobsets.wait_placed("train")
    mirror_cluster, mirror = await jobsets.wait_mirror(uid)
    assert mirror_cluster == cluster
    assert_clean_mirror(mirror, created)
    mirror_uid = mirror["metadata"]["uid"]

    obj, _, _ = await finished_and_cleaned(jobsets, "train", outcome="Completed")
    assert (condition(obj, "Completed") or {}).get("reason"), obj["status"]
    # The worker's JobSet controller made the child Jobs, owned by the mirror, and only there.
    children = mirror_child_jobs(child_jobs[cluster], "train")
    assert sorted(children) == ["train-leader-0", "train-workers-0", "train-workers-1"], children
    assert all(len(uids) == 1 for uids in children.values()), children
    for versions in child_jobs[cluster].objects().values():
        owners = versions["metadata"].get("ownerReferences") or []
        assert [o.get("uid") for o in owners] == [mirror_uid], owners
    other = next(w for w in jobsets.workers if w != cluster)
    assert child_jobs[other].events == [], f"Jobs were created on {other}"
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])
    # Its Completed condition tells the user; a Normal Completed Event only with
    # --completed-events (test_generic_kind).


async def test_live_status_shows_replicated_job_progress(
    jobsets: Relay, child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(jobset_manifest("progress", duration="4s"))
    uid = created["metadata"]["uid"]
    running = await jobsets.wait("progress", busy, timeout=60, what="workers active or ready")
    assert not jobset_finished(running)

    obj, _, _ = await finished_and_cleaned(jobsets, "progress", outcome="Completed")
    workers = replicated_status(obj, "workers")
    assert workers["succeeded"] == 2, workers
    assert not workers.get("failed") and not workers.get("active"), workers
    assert replicated_status(obj, "leader")["succeeded"] == 1, obj["status"]

    history = jobsets.jobs.versions(uid)
    progress = [replicated_status(v, "workers") for v in history]
    first_busy = next(i for i, v in enumerate(history) if busy(v))
    first_done = next(i for i, entry in enumerate(progress) if entry.get("succeeded") == 2)
    assert first_busy < first_done, f"never seen running before it succeeded: {progress}"
    before = progress[:first_done]
    assert max(int(entry.get("ready") or 0) for entry in before) > 0, f"never ready: {progress}"
    assert max(int(entry.get("active") or 0) for entry in progress) <= 2, progress
    assert jobset_finished(history[-1]) and not jobset_finished(history[first_busy])
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])


async def test_suspend_and_resume_follow_to_the_same_mirror(
    jobsets: Relay, clients: dict[str, ApiClient], child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(jobset_manifest("pause", duration="6s", suspend=False))
    uid = created["metadata"]["uid"]
    await jobsets.wait("pause", busy, timeout=60, what="workers active or ready")
    busy_since = time.monotonic()  # or earlier: its 6 s pods end by busy_since + 6
    cluster, mirror = await jobsets.wait_mirror(uid)
    mirror_uid = mirror["metadata"]["uid"]
    worker = clients[cluster]

    await jobsets.set_suspend("pause", True)

    async def mirror_suspended() -> Obj | None:
        try:
            now = await worker.get(JOBSETS, "pause", namespace=jobsets.namespace)
        except ApiError as error:
            if error.is_not_found:
                raise AssertionError(f"the mirror is gone from {cluster} unsuspended") from None
            raise
        return now if (now.get("spec") or {}).get("suspend") is True else None

    suspended = await eventually(mirror_suspended, timeout=30, what="the mirror suspended")
    assert suspended["metadata"]["uid"] == mirror_uid, "the mirror was replaced"

    async def children_suspended() -> bool:
        listed = await worker.list(
            JOBS, namespace=jobsets.namespace, label_selector=f"{JOBSET_NAME_LABEL}=pause"
        )
        return bool(listed.items) and all(j["spec"].get("suspend") for j in listed.items)

    await eventually(children_suspended, timeout=30, what="the child Jobs suspended")
    await jobsets.wait(
        "pause",
        lambda o: is_true(o, "Suspended") and not busy(o),
        timeout=30,
        what="Suspended=True and no active Jobs",
    )
    await jobsets.wait_event(
        uid, lambda e: e.get("reason") == "Suspended", what="a Suspended Event"
    )
    await outlast(busy_since, 6)  # its pods' end, had it not been suspended
    await jobsets.settled("pause")
    held = await jobsets.get("pause")
    assert not jobset_finished(held), f"finished while suspended: {held.get('status')}"
    assert placement(held) == cluster

    await jobsets.set_suspend("pause", False)
    obj, done_on, final = await finished_and_cleaned(jobsets, "pause", outcome="Completed")
    assert done_on == cluster, "resumed on another worker"
    assert final["metadata"]["uid"] == mirror_uid, "the mirror was replaced, not resumed"
    assert final["spec"].get("suspend") is False, final["spec"]
    assert not is_true(obj, "Suspended"), obj["status"]
    assert replicated_status(obj, "workers")["succeeded"] == 2, obj["status"]
    await jobsets.wait_event(uid, lambda e: e.get("reason") == "Resumed", what="a Resumed Event")
    assert any(is_true(v, "Suspended") for v in jobsets.jobs.versions(uid))
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])


async def test_created_suspended_is_not_dispatched_until_resumed(
    jobsets: Relay, child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(jobset_manifest("later", suspend=True))
    uid = created["metadata"]["uid"]
    await jobsets.wait(
        "later", lambda o: is_true(o, "Suspended"), timeout=30, what="Suspended=True by jobrelay"
    )
    await jobsets.settled("later")  # reconciled again since: held, not dispatched
    held = await jobsets.get("later")
    assert not placement(held), f"a suspended JobSet was placed: {placement(held)}"
    assert not jobset_finished(held) and not busy(held), held.get("status")
    assert jobsets.mirror_uids(uid) == set(), "a mirror was created while it was suspended"

    await jobsets.set_suspend("later", False)
    obj, cluster, mirror = await finished_and_cleaned(jobsets, "later", outcome="Completed")
    assert not is_true(obj, "Suspended"), obj["status"]
    assert mirror["spec"].get("suspend") is False, mirror["spec"]
    assert sorted(mirror_child_jobs(child_jobs[cluster], "later")) == [
        "later-leader-0",
        "later-workers-0",
        "later-workers-1",
    ]
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])


async def test_deleting_a_running_jobset_deletes_its_mirror_and_jobs(
    jobsets: Relay, clients: dict[str, ApiClient], child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(jobset_manifest("endless", outcome="run-forever"))
    uid = created["metadata"]["uid"]
    await jobsets.wait("endless", busy, timeout=60, what="workers active or ready")
    cluster, _ = await jobsets.wait_mirror(uid)

    await jobsets.manager.delete(JOBSETS, "endless", namespace=jobsets.namespace)
    await jobsets.wait_mirror_gone(uid, timeout=30)
    await jobsets.wait_gone("endless")

    async def children_gone() -> bool:
        listed = await clients[cluster].list(
            JOBS, namespace=jobsets.namespace, label_selector=f"{JOBSET_NAME_LABEL}=endless"
        )
        return not listed.items

    await eventually(children_gone, timeout=60, what="the mirror's Jobs deleted with it")
    assert len(jobsets.mirror_uids(uid)) == 1, jobsets.mirror_uids(uid)
    assert not (problems := history_problems(jobsets.jobs.versions(uid))), problems
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])


async def test_failing_jobset_ends_failed_with_a_warning_event(
    jobsets: Relay, child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(jobset_manifest("doomed", duration="1s", outcome="fail"))
    uid = created["metadata"]["uid"]
    obj, cluster, _ = await finished_and_cleaned(jobsets, "doomed", outcome="Failed")
    assert not is_true(obj, "Completed"), obj["status"]
    assert (obj.get("status") or {}).get("restarts", 0) == 0, obj["status"]
    failed = sum(int(e.get("failed") or 0) for e in obj["status"]["replicatedJobsStatus"])
    assert failed >= 1, obj["status"]
    reason = (condition(obj, "Failed") or {}).get("reason") or ""
    event = await jobsets.wait_event(
        uid,
        lambda e: e.get("type") == "Warning" and e.get("reason") == "Failed",
        what="a Warning Failed Event",
    )
    message = event.get("message") or ""
    assert cluster in message and reason in message, (reason, message)
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])


async def test_restarted_jobset_counts_its_restarts_and_never_goes_backwards(
    jobsets: Relay, child_jobs: dict[str, WatchRecorder]
) -> None:
    created = await jobsets.submit(
        jobset_manifest("again", duration="1s", outcome="fail", failurePolicy={"maxRestarts": 1})
    )
    uid = created["metadata"]["uid"]
    obj, cluster, _ = await finished_and_cleaned(jobsets, "again", outcome="Failed")
    assert obj["status"]["restarts"] == 1, obj["status"]
    # finished_and_cleaned checked every version: restarts never went down, and within
    # one restart count no counter went down.
    # The worker's JobSet controller recreated the child Jobs once: two generations.
    children = mirror_child_jobs(child_jobs[cluster], "again")
    assert {name: len(uids) for name, uids in children.items()} == {
        "again-leader-0": 2,
        "again-workers-0": 2,
        "again-workers-1": 2,
    }, children
    await jobsets.wait_event(
        uid,
        lambda e: e.get("type") == "Warning" and e.get("reason") == "Failed",
        what="a Warning Failed Event",
    )
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])


async def test_sigkilled_controller_neither_loses_nor_doubles_a_jobset(
    jobsets: Relay, controller: ControllerProcess, child_jobs: dict[str, WatchRecorder]
) -> None:
    # It runs 40 s: the restarted controller acts only once the SIGKILLed leader's Lease
    # expires (15 s, up to 21 s after the kill on a loaded machine), and a JobSet
    # dispatched before the kill must still be running then for its run to be seen.
    created = await jobsets.submit(jobset_manifest("survivor", duration="40s"))
    uid = created["metadata"]["uid"]
    # Right away (dispatch may be under way), then again while it runs.
    await controller.restart(jobsets.manager)
    await jobsets.wait("survivor", busy, timeout=60, what="workers active or ready")
    cluster, _ = await jobsets.wait_mirror(uid)
    await controller.restart(jobsets.manager)

    obj, done_on, _ = await finished_and_cleaned(jobsets, "survivor", outcome="Completed")
    assert done_on == cluster
    assert replicated_status(obj, "workers")["succeeded"] == 2, obj["status"]
    mirrors = jobsets.mirror_uids(uid)
    assert len(mirrors) == 1, f"more than one mirror was created: {sorted(mirrors)}"
    children = mirror_child_jobs(child_jobs[cluster], "survivor")
    assert all(len(uids) == 1 for uids in children.values()), f"Jobs made twice: {children}"
    gaps = {worker: recorder.relists for worker, recorder in jobsets.worker_jobs.items()}
    assert not any(gaps.values()), f"the workers' watches relisted (may have missed one): {gaps}"
    await assert_nothing_ran_on_the_manager(jobsets, child_jobs["manager"])
