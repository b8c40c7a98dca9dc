"""The executor against in-memory apiservers: each action's writes, preconditions and failures."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from tests.unit.controller.builders import (
    JOB,
    JOBSET,
    NAME,
    NAMESPACE,
    UID,
    job,
    key_of,
    mirror,
)
from tests.unit.controller.fakes import (
    FakeCluster,
    FakeCopyFeed,
    FakeEvents,
    FakeNamespaceFeed,
    FakePool,
    FakeWorker,
    executor_over,
)

from jobrelay.controller.relay.executor import Collided, Executor
from jobrelay.controller.relay.own_writes import OwnWrites
from jobrelay.controller.relay.plan import (
    Action,
    CreateMirror,
    DeleteMirror,
    Done,
    Log,
    PatchMirror,
    Place,
    Plan,
    ReadFresh,
    RecordEvent,
    Retry,
    Terminal,
    WriteStatus,
)
from jobrelay.fleet.namespace_grants import MANAGER_NAMESPACE_UID
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    MIRRORS_ANNOTATION,
    ORIGIN_LABEL,
    PLACEMENTS_ANNOTATION,
)
from jobrelay.vocabulary.outcome import Lane

KEY = key_of(JOB)
JOB_PATH = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{NAME}"


@dataclass
class Env:
    manager: FakeCluster
    worker: FakeWorker
    executor: Executor
    events: FakeEvents

    def stored_job(self) -> JsonObj:
        obj = self.manager.get("jobs", KEY.key)
        assert obj is not None
        return obj

    async def run(self, *actions: Action, obj: JsonObj | None = None, release: bool = False) -> Any:
        return await self.executor.apply(
            KEY, JOB, obj or self.stored_job(), Plan(tuple(actions), release=release)
        )


async def make_env(*, create_namespaces: bool = True) -> AsyncIterator[Env]:
    manager = FakeCluster("manager")
    manager.put("jobs", job(rv="0"))
    worker = FakeWorker("w1", FakeCluster("w1"))
    pool = FakePool(worker)
    events = FakeEvents()
    client = manager.client()
    executor = executor_over(client, pool, events, create_namespaces=create_namespaces)
    yield Env(manager, worker, executor, events)
    await client.aclose()
    await pool.aclose()


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async for value in make_env():
        yield value


@pytest.fixture
async def strict_env() -> AsyncIterator[Env]:
    """Namespace creation turned off."""
    async for value in make_env(create_namespaces=False):
        yield value


def rv(env: Env) -> str:
    return str(env.stored_job()["metadata"]["resourceVersion"])


def create_action(env: Env, cluster: str = "w1") -> CreateMirror:
    placed = env.stored_job()
    body = JOB.build_mirror(placed, controller_name="jobrelay.dev/relay", origin="manager")
    return CreateMirror(cluster, body, UID)


# -- Place --------------------------------------------------------------------------


async def test_place_is_a_compare_and_swap_and_reserves_the_worker(env: Env) -> None:
    assert await env.run(Place("w1", rv(env))) is None
    stored = env.stored_job()
    assert stored["metadata"]["annotations"] == {
        CLUSTER_ANNOTATION: "w1",
        PLACEMENTS_ANNOTATION: "w1",
    }
    method, path, body = env.manager.writes()[-1]
    assert (method, path) == ("PATCH", JOB_PATH)
    assert body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
    # Until its mirror is visible, the placement counts on the worker's load.
    assert env.executor.memory.reservations.count("w1") == 1
    # A plan that finds the mirror visible releases it.
    await env.run(release=True)
    assert env.executor.memory.reservations.count("w1") == 0


async def test_place_conflict_retries_and_releases_the_reservation(env: Env) -> None:
    stale = rv(env)
    env.manager.put("jobs", env.stored_job())  # someone else wrote: a new resourceVersion
    outcome = await env.run(Place("w1", stale), create_action(env))
    assert isinstance(outcome, Retry)
    assert env.executor.memory.reservations.count("w1") == 0
    assert "annotations" not in env.stored_job()["metadata"]
    # The plan stopped: the create that followed the placement was never sent.
    assert env.worker.cluster.requests == []


async def test_place_on_a_deleted_object_retries(env: Env) -> None:
    env.manager.objects.clear()
    outcome = await env.run(Place("w1", "5"), obj=job())
    assert isinstance(outcome, Retry)
    assert env.executor.memory.reservations.count("w1") == 0


async def test_place_failing_otherwise_raises_and_releases(env: Env) -> None:
    env.manager.fail("PATCH", JOB_PATH, 500, "InternalError")
    with pytest.raises(ApiError):
        await env.run(Place("w1", rv(env)))
    assert env.executor.memory.reservations.count("w1") == 0
    env.manager.fail("PATCH", JOB_PATH, 0, "")
    with pytest.raises(ApiError) as raised:
        await env.run(Place("w1", rv(env)))
    assert raised.value.is_unreachable
    assert env.executor.memory.reservations.count("w1") == 0
    env.manager.fail("PATCH", JOB_PATH, -1, "boom")
    with pytest.raises(RuntimeError):
        await env.run(Place("w1", rv(env)))
    assert env.executor.memory.reservations.count("w1") == 0


# -- CreateMirror -------------------------------------------------------------------


async def test_create_sends_the_body_and_expects_it(env: Env) -> None:
    action = create_action(env)
    assert await env.run(action) is None
    created = env.worker.cluster.get("jobs", KEY.key)
    assert created is not None
    assert created["spec"] == action.body["spec"]
    assert env.executor.memory.created.pending(("w1", KEY, UID))


async def test_create_meeting_a_namesake_is_a_collision(env: Env) -> None:
    env.worker.cluster.put("jobs", {"metadata": {"name": NAME, "namespace": NAMESPACE}})
    assert await env.run(create_action(env)) == Collided("w1")
    assert not env.executor.memory.created.pending(("w1", KEY, UID))


async def test_create_in_a_missing_namespace_creates_it_then_the_mirror(env: Env) -> None:
    env.worker.cluster.namespaces.clear()
    assert await env.run(create_action(env)) is None
    assert NAMESPACE in env.worker.cluster.namespaces
    assert [(m, p) for m, p, _ in env.worker.cluster.writes()] == [
        ("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"),
        ("POST", "/api/v1/namespaces"),
        ("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"),
    ]
    assert env.worker.cluster.get("jobs", KEY.key) is not None
    assert env.executor.memory.created.pending(("w1", KEY, UID))


async def test_a_namespace_created_on_a_worker_carries_the_managers_pod_security_labels(
    env: Env,
) -> None:
    env.manager.namespace_labels[NAMESPACE] = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.35",
        "pod-security.kubernetes.io/warn": "restricted",
        "team": "vision",  # not Pod Security: not the workers' business
    }
    env.worker.cluster.namespaces.clear()
    assert await env.run(create_action(env)) is None
    assert env.worker.cluster.namespace_labels[NAMESPACE] == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.35",
        "pod-security.kubernetes.io/warn": "restricted",
        ORIGIN_LABEL: "manager",  # open to this manager alone
    }


async def test_a_namespace_created_on_a_worker_records_the_manager_namespace_it_serves(
    env: Env,
) -> None:
    env.worker.cluster.namespaces.clear()
    assert await env.run(create_action(env)) is None
    assert env.worker.cluster.namespace_annotations[NAMESPACE] == {
        MANAGER_NAMESPACE_UID: f"manager-ns-{NAMESPACE}"
    }


def new_uid(namespace: str) -> str:
    return "new-uid"


def old_uid(namespace: str) -> str:
    return "old-uid"


async def test_a_namespace_made_for_an_earlier_manager_namespace_gets_nothing(env: Env) -> None:
    """A manager namespace deleted and made again (another UID) inherits nothing of the
    worker namespace made for the old one: no mirror, no copy there."""
    env.executor.namespaces = replace(env.executor.namespaces, manager_namespace_uid=new_uid)
    env.worker.namespace_feed = FakeNamespaceFeed(made={NAMESPACE: "old-uid"})
    retry = await env.run(create_action(env))
    assert isinstance(retry, Retry) and "made for an earlier namespace" in retry.why
    # Found so by the create (the cache did not know yet): the same.
    env.worker.namespace_feed = FakeNamespaceFeed(judged=True, origins={})
    env.worker.cluster.namespace_labels[NAMESPACE] = {ORIGIN_LABEL: "manager"}
    env.worker.cluster.namespace_annotations[NAMESPACE] = {MANAGER_NAMESPACE_UID: "old-uid"}
    retry = await env.run(create_action(env))
    assert isinstance(retry, Retry) and "kubectl delete namespace" in retry.why
    assert env.worker.cluster.get("jobs", KEY.key) is None
    # The same namespace (its UID recorded): fine.
    env.executor.namespaces = replace(env.executor.namespaces, manager_namespace_uid=old_uid)
    assert await env.run(create_action(env)) is None


async def test_a_namespace_created_meanwhile_with_our_label_is_fine(env: Env) -> None:
    env.worker.cluster.namespace_labels[NAMESPACE] = {ORIGIN_LABEL: "manager"}
    env.worker.cluster.fail("POST", "/jobs", 404, "NotFound")
    assert await env.run(create_action(env)) is None  # the namespace exists: AlreadyExists
    assert env.worker.cluster.get("jobs", KEY.key) is not None


@pytest.mark.parametrize("labels", [{}, {ORIGIN_LABEL: "another-manager"}])
async def test_a_namespace_someone_else_created_meanwhile_gets_no_mirror(
    env: Env, labels: dict[str, str]
) -> None:
    # The cache showed team-a absent (so placement let it through); the create of the
    # namespace meets one made meanwhile by a tenant or another manager.
    env.worker.namespace_feed = FakeNamespaceFeed(judged=True, origins={})
    env.worker.cluster.namespace_labels[NAMESPACE] = labels
    outcome = await env.run(create_action(env))
    assert isinstance(outcome, Retry)  # decided again, not lost
    assert f"namespace {NAMESPACE} on worker cluster w1 exists there and is not open" in (
        outcome.why
    )
    assert f"label {ORIGIN_LABEL}=manager" in outcome.why
    assert env.worker.cluster.get("jobs", KEY.key) is None
    assert [(m, p) for m, p, _ in env.worker.cluster.writes()] == [("POST", "/api/v1/namespaces")]
    assert not env.executor.memory.created.pending(("w1", KEY, UID))


async def test_a_namespace_the_cache_shows_absent_is_created_with_the_label_first(
    env: Env,
) -> None:
    env.worker.namespace_feed = FakeNamespaceFeed(judged=True, origins={})
    env.worker.cluster.namespaces.clear()
    assert await env.run(create_action(env)) is None
    assert env.worker.cluster.namespace_labels[NAMESPACE] == {ORIGIN_LABEL: "manager"}
    assert [(m, p) for m, p, _ in env.worker.cluster.writes()] == [
        ("POST", "/api/v1/namespaces"),
        ("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"),
    ]


async def test_a_namespace_the_cache_shows_open_is_used_at_once(env: Env) -> None:
    env.worker.namespace_feed = FakeNamespaceFeed(judged=True, origins={NAMESPACE: "manager"})
    assert await env.run(create_action(env)) is None
    assert [(m, p) for m, p, _ in env.worker.cluster.writes()] == [
        ("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"),
    ]


@pytest.mark.parametrize(
    ("username", "everywhere", "bound"),
    [
        ("system:serviceaccount:jobrelay-system:jobrelay-worker-m", False, True),
        ("system:serviceaccount:jobrelay-system:jobrelay-worker-m", None, True),
        ("system:serviceaccount:jobrelay-system:jobrelay-worker-m", True, False),  # reads all
        ("kubernetes-admin", False, False),  # not a ServiceAccount: nothing to bind
    ],
)
async def test_a_mirror_binds_the_namespaced_role_its_pod_logs_are_read_with(
    env: Env, username: str, everywhere: bool | None, bound: bool
) -> None:
    """A plain Job copies nothing; its pods' logs are still read with the namespace's
    grant (pods/log is only in the namespaced ClusterRole): bound before the create, so
    its pods' logs are readable from their start, and once."""
    env.worker.namespace_feed = FakeNamespaceFeed(
        judged=True, origins={NAMESPACE: "manager"}, username=username
    )
    env.worker.dependency_feed = FakeCopyFeed(everywhere=everywhere)
    # The worker's authorizer answers the review the binding waits on (a 403: go on).
    env.worker.cluster.fail("POST", "/selfsubjectaccessreviews", 403, "Forbidden", times=9)
    assert await env.run(create_action(env)) is None
    del env.worker.cluster.objects[("jobs", NAMESPACE, NAME)]
    assert await env.run(create_action(env)) is None  # a second mirror there: bound already
    posts = [p for m, p, _ in env.worker.cluster.writes() if m == "POST"]
    binding = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings"
    job_create = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    expected = [binding, job_create, job_create] if bound else [job_create, job_create]
    assert [p for p in posts if not p.endswith("selfsubjectaccessreviews")] == expected
    if bound:
        stored = env.worker.cluster.get("rolebindings", f"{NAMESPACE}/jobrelay-worker-m")
        assert stored is not None
        assert stored["roleRef"]["name"] == "jobrelay-worker-m-namespaced"


async def test_without_namespace_creation_an_unlabelled_namespace_gets_no_mirror(
    strict_env: Env,
) -> None:
    strict_env.worker.namespace_feed = FakeNamespaceFeed(judged=True, origins={})
    outcome = await strict_env.run(create_action(strict_env))
    assert isinstance(outcome, Retry)
    assert "is not open to this manager" in outcome.why
    assert strict_env.worker.cluster.get("jobs", KEY.key) is None


async def test_a_namespace_that_cannot_be_created_stops_the_plan(env: Env) -> None:
    env.worker.cluster.namespaces.clear()
    env.worker.cluster.fail("POST", "/api/v1/namespaces", 403, "Forbidden")
    with pytest.raises(ApiError) as raised:
        await env.run(create_action(env))
    assert raised.value.code == 403


async def test_create_in_a_missing_namespace_without_creating_it_is_terminal(
    strict_env: Env,
) -> None:
    strict_env.worker.cluster.namespaces.clear()
    outcome = await strict_env.run(create_action(strict_env))
    assert isinstance(outcome, Terminal)
    assert outcome.reason == "MirrorRejected"
    assert outcome.retry_after == 30.0
    assert "has no namespace team-a (and namespace creation is turned off)" in outcome.message
    assert strict_env.worker.cluster.namespaces == set()


async def test_not_found_even_with_the_namespace_there_does_not_blame_the_namespace(
    env: Env,
) -> None:
    # A worker that does not serve the kind (its CRD is missing) answers 404 too.
    env.worker.cluster.namespace_labels[NAMESPACE] = {ORIGIN_LABEL: "manager"}
    env.worker.cluster.fail("POST", "/jobs", 404, "NotFound", times=2)
    outcome = await env.run(create_action(env))
    assert isinstance(outcome, Terminal)
    assert outcome.reason == "MirrorRejected"
    assert "namespace creation is turned off" not in outcome.message
    assert "Job" in outcome.message and "batch/v1" in outcome.message


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (
            403,
            "Forbidden",
            "rejected the mirror Job (HTTP 403 Forbidden: a policy there refuses it)",
        ),
        (422, "Invalid", "rejected the mirror Job (HTTP 422 Invalid: it finds the object invalid)"),
        (0, "", "worker cluster w1 is unreachable"),
    ],
)
async def test_a_mirror_the_worker_refuses_is_terminal_for_a_while(
    env: Env, code: int, reason: str, expected: str
) -> None:
    env.worker.cluster.fail("POST", "/jobs", code, reason)
    outcome = await env.run(create_action(env), RecordEvent("Normal", "Dispatched", "x"))
    assert isinstance(outcome, Terminal)
    assert (outcome.reason, outcome.retry_after) == ("MirrorRejected", 30.0)
    assert expected in outcome.message
    assert env.events.recorded == []  # the plan stopped before the Dispatched event


async def test_create_on_a_worker_that_went_away_retries(env: Env) -> None:
    assert isinstance(await env.run(create_action(env, "gone")), Retry)


# -- PatchMirror --------------------------------------------------------------------


def patch_action(patch: JsonObj | None = None, cluster: str = "w1") -> PatchMirror:
    return PatchMirror(cluster, NAME, NAMESPACE, patch or {"spec": {"suspend": True}})


async def test_patch_mirror(env: Env) -> None:
    env.worker.cluster.put("jobs", JOB.build_mirror(job(), controller_name="c", origin="m"))
    assert await env.run(patch_action()) is None
    stored = env.worker.cluster.get("jobs", KEY.key)
    assert stored is not None and stored["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [(409, "Conflict", Retry), (404, "NotFound", Retry), (422, "Invalid", Terminal)],
)
async def test_patch_mirror_failures(
    env: Env, code: int, reason: str, expected: type[Retry | Terminal]
) -> None:
    env.worker.cluster.put("jobs", JOB.build_mirror(job(), controller_name="c", origin="m"))
    env.worker.cluster.fail("PATCH", f"/jobs/{NAME}", code, reason)
    outcome = await env.run(patch_action())
    assert isinstance(outcome, expected)
    if isinstance(outcome, Terminal):
        assert outcome.reason == "MirrorUpdateRejected"
        assert outcome.retry_after == 30.0


async def test_patch_mirror_server_error_raises(env: Env) -> None:
    env.worker.cluster.fail("PATCH", f"/jobs/{NAME}", 500, "InternalError")
    with pytest.raises(ApiError):
        await env.run(patch_action())


async def test_patch_mirror_on_a_worker_that_went_away_retries(env: Env) -> None:
    assert isinstance(await env.run(patch_action(cluster="gone")), Retry)


# -- DeleteMirror -------------------------------------------------------------------


def delete_action(uid: str, cluster: str = "w1") -> DeleteMirror:
    return DeleteMirror(cluster, NAME, NAMESPACE, uid, "its Job has finished")


async def test_delete_is_preconditioned_on_the_uid_and_expected(env: Env) -> None:
    stored = env.worker.cluster.put("jobs", mirror(job()))
    uid = stored["metadata"]["uid"]
    assert await env.run(delete_action(uid)) is None
    assert env.worker.cluster.get("jobs", KEY.key) is None
    method, path, options = env.worker.cluster.writes()[-1]
    assert (method, path) == ("DELETE", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{NAME}")
    assert options["preconditions"] == {"uid": uid}
    assert options["propagationPolicy"] == "Background"
    assert env.executor.memory.deleted.pending(uid)
    # Deleted already (the cache has not caught up): not sent again.
    assert await env.run(delete_action(uid)) is None
    assert len(env.worker.cluster.writes()) == 1


async def test_delete_is_expected_before_it_is_sent(env: Env) -> None:
    """Its watch event may come before its answer: it is known as this delete's then."""
    uid = env.worker.cluster.put("jobs", mirror(job()))["metadata"]["uid"]
    pending_when_sent: list[bool] = []

    def arrived(method: str, path: str) -> None:
        if method == "DELETE":
            pending_when_sent.append(env.executor.memory.deleted.pending(uid))

    env.worker.cluster.on_request = arrived
    assert await env.run(delete_action(uid)) is None
    assert pending_when_sent == [True]


async def test_delete_of_a_mirror_already_gone_is_fine_and_expected(env: Env) -> None:
    assert await env.run(delete_action("m-gone"), RecordEvent("Normal", "After", "x")) is None
    assert env.executor.memory.deleted.pending("m-gone")
    assert env.events.reasons() == ["After"]  # the plan went on


async def test_delete_never_removes_a_newer_namesake(env: Env) -> None:
    newer = env.worker.cluster.put("jobs", mirror(job()))
    assert await env.run(delete_action("m-older")) is None  # 409 on the precondition
    assert env.worker.cluster.get("jobs", KEY.key) == newer
    assert env.executor.memory.deleted.pending("m-older")


async def test_delete_failing_otherwise_raises(env: Env) -> None:
    env.worker.cluster.put("jobs", mirror(job()))
    env.worker.cluster.fail("DELETE", f"/jobs/{NAME}", 500, "InternalError")
    with pytest.raises(ApiError):
        await env.run(delete_action("m-1"))
    assert not env.executor.memory.deleted.pending("m-1")


async def test_delete_on_a_worker_that_went_away_is_skipped(env: Env) -> None:
    assert await env.run(delete_action("m-1", cluster="gone")) is None
    assert not env.executor.memory.deleted.pending("m-1")


# -- WriteStatus --------------------------------------------------------------------


def write_action(resource_version: str) -> WriteStatus:
    status = {"active": 1, "startTime": "2026-03-01T12:00:00Z"}
    return WriteStatus(status, resource_version, status)


async def test_write_status_patches_the_status_subresource(env: Env) -> None:
    assert await env.run(write_action(rv(env))) is None
    method, path, body = env.manager.writes()[-1]
    assert (method, path) == ("PATCH", JOB_PATH + "/status")
    assert body["status"] == {"active": 1, "startTime": "2026-03-01T12:00:00Z"}
    assert "resourceVersion" in body["metadata"]
    assert env.stored_job()["status"]["active"] == 1


async def test_write_status_conflict_retries_and_stops_the_plan(env: Env) -> None:
    stale = rv(env)
    env.manager.put("jobs", env.stored_job())
    outcome = await env.run(write_action(stale), RecordEvent("Normal", "Completed", "done"))
    assert isinstance(outcome, Retry)
    assert "status" not in env.stored_job()
    assert env.events.recorded == []


async def test_write_status_of_a_deleted_object_retries(env: Env) -> None:
    env.manager.objects.clear()
    assert isinstance(await env.run(write_action("1"), obj=job()), Retry)


async def test_write_status_failing_otherwise_raises(env: Env) -> None:
    env.manager.fail("PATCH", "/status", 500, "InternalError")
    with pytest.raises(ApiError):
        await env.run(write_action(rv(env)))


async def test_a_status_the_apiserver_refuses_is_terminal_and_says_so(env: Env) -> None:
    env.manager.fail("PATCH", "/status", 422, "Invalid")
    outcome = await env.run(write_action(rv(env)), RecordEvent("Normal", "Completed", "done"))
    assert isinstance(outcome, Terminal) and outcome.reason == "StatusNotCopied"
    assert "a jobrelay bug" in outcome.message and outcome.retry_after is None
    assert env.events.recorded == []  # the plan stopped there


# -- Events and logs ----------------------------------------------------------------


async def test_events_and_logs(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobrelay.controller.relay.executor")
    outcome = await env.run(
        RecordEvent("Warning", "NoWorkerAvailable", "none"),
        Log("warning", "careful"),
        Log("info", "fyi"),
    )
    assert outcome is None
    assert [(e.name, e.type, e.reason) for e in env.events.recorded] == [
        (NAME, "Warning", "NoWorkerAvailable")
    ]
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.WARNING, f"{KEY}: careful") in levels
    assert (logging.INFO, f"{KEY}: fyi") in levels
    # No object (it is gone): no Event to hang on it.
    await env.executor.apply(KEY, JOB, None, Plan((RecordEvent("Normal", "X", "y"),)))
    assert len(env.events.recorded) == 1


async def test_a_whole_plan_places_then_creates(env: Env) -> None:
    obj = env.stored_job()
    body = JOB.build_mirror(obj, controller_name="jobrelay.dev/relay", origin="manager")
    outcome = await env.run(
        Place("w1", rv(env)),
        CreateMirror("w1", body, UID),
        RecordEvent("Normal", "Dispatched", "Dispatched to worker cluster w1"),
    )
    assert outcome is None
    assert env.worker.cluster.get("jobs", KEY.key) is not None
    assert env.events.reasons() == ["Dispatched"]


async def test_resources_follow_the_kind(env: Env) -> None:
    """The executor names no kind: a JobSet's writes go to the jobsets resource."""
    obj = {
        "apiVersion": JOBSET.ref.api_version,
        "kind": "JobSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": UID},
        "spec": {},
    }
    env.manager.put("jobsets", obj)
    plan = Plan((Place("w1", obj["metadata"]["resourceVersion"]),))
    assert await env.executor.apply(key_of(JOBSET), JOBSET, obj, plan) is None
    assert env.manager.writes()[-1][1] == (
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets/{NAME}"
    )


# -- what the metrics hear ----------------------------------------------------------


class Heard:
    """A RelayObserver that writes down what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def placed(self, key: Any, obj: JsonObj | None, cluster: str, history: tuple[str, ...]) -> None:
        self.calls.append(("placed", cluster, history))

    def mirror_created(self, key: Any, cluster: str) -> None:
        self.calls.append(("mirror_created", cluster))

    def status_written(self, key: Any, kind: Any, obj: JsonObj | None, status: JsonObj) -> None:
        self.calls.append(("status_written", dict(status)))


async def test_the_observer_hears_each_write_that_succeeded(env: Env) -> None:
    heard = Heard()
    env.executor.observer = heard
    obj = env.stored_job()
    body = JOB.build_mirror(obj, controller_name="jobrelay.dev/relay", origin="manager")
    assert await env.run(Place("w1", rv(env), ("w1",)), CreateMirror("w1", body, UID)) is None
    assert await env.run(write_action(rv(env))) is None
    assert heard.calls == [
        ("placed", "w1", ("w1",)),
        ("mirror_created", "w1"),
        ("status_written", {"active": 1, "startTime": "2026-03-01T12:00:00Z"}),
    ]


async def test_the_observer_hears_nothing_of_writes_that_failed(env: Env) -> None:
    heard = Heard()
    env.executor.observer = heard
    stale = rv(env)
    env.manager.put("jobs", env.stored_job())  # a new resourceVersion: both CAS writes fail
    assert isinstance(await env.run(Place("w1", stale)), Retry)
    assert isinstance(await env.run(write_action(stale)), Retry)
    env.worker.cluster.put("jobs", mirror(job()))  # a namesake: the create collides
    assert isinstance(await env.run(create_action(env)), Collided)
    assert heard.calls == []


# -- the record of the mirror created -------------------------------------------------


async def test_a_created_mirrors_uid_is_remembered_from_the_creates_answer(env: Env) -> None:
    """The UID the worker gave the mirror we created, by run, is what the relay follows
    until the record is written off the dispatch path: no write of the object here."""
    stored = env.stored_job()
    stored["metadata"]["annotations"] = {MIRRORS_ANNOTATION: "1:w9:uid-old,3:w1:made-up"}
    env.manager.put("jobs", stored)
    writes_before = len(env.manager.writes())
    body = JOB.build_mirror(stored, controller_name="jobrelay.dev/relay", origin="manager", run=2)
    assert await env.run(CreateMirror("w1", body, UID, run=2)) is None
    created = env.worker.cluster.get("jobs", KEY.key)
    assert created is not None
    assert len(env.manager.writes()) == writes_before
    remembered = env.executor.memory.unrecorded("w1", KEY)
    assert remembered is not None
    assert (remembered.run, remembered.uid) == (2, created["metadata"]["uid"])
    assert env.executor.memory.unrecorded("w9", KEY) is None


async def test_a_create_that_collides_records_nothing(env: Env) -> None:
    env.worker.cluster.put("jobs", mirror(job()))
    assert isinstance(await env.run(create_action(env)), Collided)
    assert MIRRORS_ANNOTATION not in (env.stored_job()["metadata"].get("annotations") or {})


async def test_writes_whose_echo_needs_no_look_tell_memory_the_version_they_made(
    env: Env,
) -> None:
    """Their watch events are echoes, not reconciled (controller/relay/own_writes.py): a
    placement the reconcile goes on from, a status copy that ends the decision. A write a
    decision ends with and goes on from at its echo is looked at as any event."""
    own = env.executor.memory.own_writes

    async def apply(plan: Plan) -> Any:
        return await env.executor.apply(KEY, JOB, env.stored_job(), plan)

    placed_at = rv(env)
    place = Place("w1", placed_at)
    assert await apply(Plan((place,), ReadFresh(obj=True))) is None
    placed = rv(env)
    copied = write_action(placed)
    assert await apply(Plan((copied,), Done(), echo_needed=False)) is None
    written = rv(env)
    assert not own.is_echo(KEY, placed)  # only the newest write's version is kept
    assert own.is_echo(KEY, written)
    # A status written before a move, looked at again when its echo comes: not kept.
    before_move = write_action(written)
    assert await apply(Plan((before_move,), Done())) is None
    assert not own.is_echo(KEY, rv(env))
    # A write that fails makes no version.
    stale = write_action(placed)
    assert isinstance(await apply(Plan((stale,), Done(), echo_needed=False)), Retry)
    assert not own.is_echo(KEY, rv(env))


async def test_events_during_a_write_whose_echo_needs_no_look_wait_for_its_answer(
    env: Env,
) -> None:
    """An event of the object that comes while such a write is under way waits for its
    answer (own_writes.py): dropped when it shows the written version, queued otherwise,
    and queued when the write fails. A write whose echo is looked at holds nothing."""
    queued: list[tuple[Any, Lane]] = []
    env.executor.memory.own_writes = own = OwnWrites(
        requeue=lambda k, lane: queued.append((k, lane))
    )
    waited: list[bool] = []

    def arrived(method: str, path: str) -> None:
        if method == "PATCH":
            waited.append(own.defer(KEY, "someone-else", Lane.FRESH))

    env.manager.on_request = arrived

    async def apply(plan: Plan) -> Any:
        return await env.executor.apply(KEY, JOB, env.stored_job(), plan)

    assert await apply(Plan((Place("w1", rv(env)),), ReadFresh(obj=True))) is None
    assert (waited, queued) == ([True], [(KEY, Lane.FRESH)])
    assert own.is_echo(KEY, rv(env))  # its own echo is still to come
    assert await apply(Plan((write_action(rv(env)),), Done())) is None  # echo looked at
    assert (waited[-1], len(queued)) == (False, 1)
    stale = write_action("0")
    assert isinstance(await apply(Plan((stale,), Done(), echo_needed=False)), Retry)
    assert (waited[-1], queued[-1]) == (True, (KEY, Lane.FRESH))
