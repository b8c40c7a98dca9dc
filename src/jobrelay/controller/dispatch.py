"""The dispatch reconciler: one management Job, its one mirror, and the status between them.

Level-triggered and stateless: every pass reads the management Job and its
mirror from the informer caches, works out what should be, and writes only the
difference. What must survive a restart is on the apiservers: the placement as
an annotation on the management Job (written *before* the mirror is created,
with a resourceVersion precondition, so a Job can only ever be placed once),
and the origin labels on the mirror. A crash between any two writes leaves a
state the next pass completes.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from jobrelay.controller.expectations import Expectations
from jobrelay.controller.options import ControllerOptions
from jobrelay.fleet.workers import Worker, WorkerPool
from jobrelay.jobs.conditions import COMPLETE, FAILED, finished_condition, is_finished
from jobrelay.jobs.contract import status_violations
from jobrelay.jobs.mirror import build_mirror, is_mirror_of, is_ours, mirror_spec_patch
from jobrelay.jobs.naming import CLUSTER_ANNOTATION, ORIGIN_UID_LABEL
from jobrelay.jobs.patches import merge_patch
from jobrelay.jobs.spec import is_suspended
from jobrelay.jobs.status import next_status
from jobrelay.kube.api import JOBS, NAMESPACES, ApiClient, ApiError
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.watching import Informer, object_key
from jobrelay.placement.leastloaded import Candidate, place

_log = logging.getLogger(__name__)

Obj = dict[str, Any]

# Requeue soon after a write conflict: the watch event that supersedes our
# cached copy is usually already on its way.
_CONFLICT_RETRY = 0.2
# A placed worker whose cache has not listed yet: look again shortly.
_UNSYNCED_RETRY = 1.0


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _origin_uid(mirror: Mapping[str, Any]) -> str | None:
    labels = _meta(mirror).get("labels") or {}
    value = labels.get(ORIGIN_UID_LABEL)
    return str(value) if value else None


def slim_job(job: dict[str, Any]) -> dict[str, Any]:
    """Drop what the dispatcher never reads (managedFields are often half a Job)."""
    metadata = job.get("metadata")
    if metadata and "managedFields" in metadata:
        job = {**job, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    return job


def managed_by(controller_name: str) -> Any:
    """An informer transform that keeps only the Jobs this controller manages, slimmed."""

    def transform(job: dict[str, Any]) -> dict[str, Any] | None:
        if (job.get("spec") or {}).get("managedBy") != controller_name:
            return None
        return slim_job(job)

    return transform


class Dispatcher:
    """Reconciles management Jobs (keys ``namespace/name``) with their mirrors."""

    def __init__(
        self,
        manager: ApiClient,
        jobs: Informer,
        pool: WorkerPool,
        events: EventRecorder,
        options: ControllerOptions,
    ) -> None:
        self._manager = manager
        self._jobs = jobs
        self._pool = pool
        self._events = events
        self._options = options
        # Placements whose mirror the worker's cache does not show yet, so that a
        # burst of Jobs spreads out instead of all seeing the same loads.
        self._placing: dict[str, set[str]] = {}
        # Mirrors created as (cluster, key, origin uid), and deleted by their uid,
        # that the worker caches do not show yet.
        self._created = Expectations()
        self._deleted = Expectations()

    # -- the reconcile ----------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """Bring one management Job and its mirror in line; returns a requeue delay or None."""
        job = self._jobs.get(key)
        if job is None or _meta(job).get("deletionTimestamp"):
            self._release(key)
            await self._delete_mirrors(key, keep_uid=None, why="its management Job is gone")
            return None
        uid = str(_meta(job).get("uid"))
        await self._delete_mirrors(
            key, keep_uid=uid, why="it belongs to an earlier Job of this name"
        )

        if is_finished(job):
            self._release(key)
            # The final status is on the management Job: the mirror has served its purpose.
            if not self._options.keep_finished_mirrors:
                await self._delete_mirrors(key, keep_uid=None, why="its Job has finished")
            return None

        cluster = (_meta(job).get("annotations") or {}).get(CLUSTER_ANNOTATION)
        placed_now = False
        if not cluster:
            if is_suspended(job):
                # Created suspended: nothing runs anywhere until it is resumed.
                await self._write_status(job, next_status(job, None, now=_now()))
                return None
            placed, retry = await self._place(job)
            if placed is None:
                return retry
            job, cluster, placed_now = placed, _cluster_of(placed), True

        worker = self._pool.get(cluster)
        if worker is None:
            self._events.record(
                job, "Warning", "WorkerUnavailable",
                f"placed on worker cluster {cluster}, which is not registered or not connected",
            )  # fmt: skip
            return self._options.unplaceable_retry
        if not worker.mirrors.has_synced:
            return _UNSYNCED_RETRY

        mirror = worker.mirrors.get(key)
        if mirror is not None and not is_mirror_of(mirror, job, self._options.controller_name):
            mirror = None  # an earlier incarnation's; deleted above, the cache will catch up
        if mirror is None and self._created.pending((cluster, key, uid)):
            # Created by an earlier pass; its watch event will bring the key back.
            return None
        if mirror is None:
            if not placed_now:
                # The caches may lag our own writes: a mirror we deleted after copying
                # its final status must not come back because the cached Job does not
                # show that status yet. Only the apiserver's copy can tell.
                fresh = await self._fresh(job)
                if fresh is None or is_finished(fresh):
                    return None
                if _meta(fresh).get("uid") != uid or _cluster_of(fresh) != cluster:
                    return _CONFLICT_RETRY  # replaced or moved meanwhile: start over from the cache
                job = fresh
                if _has_run(job):
                    _log.warning("mirror of %s is gone from %s: creating it again", key, cluster,
                                 extra={"job": key, "cluster": cluster})  # fmt: skip
            mirror, retry = await self._create_mirror(worker, job)
            if mirror is None:
                return retry
        else:
            self._release(key)
            self._created.observed((cluster, key, uid))

        await self._sync_spec(worker, job, mirror)
        status = next_status(job, mirror, now=_now())
        written = await self._write_status(job, status)
        if written is None:
            return _CONFLICT_RETRY
        if is_finished(written):
            self._announce_finish(written, cluster)
            if not self._options.keep_finished_mirrors:
                await self._delete_mirror(worker, mirror, why="its Job has finished")
        return None

    # -- placement ----------------------------------------------------------------

    def _reserve(self, cluster: str, key: str) -> None:
        self._release(key)
        self._placing.setdefault(cluster, set()).add(key)

    def _release(self, key: str) -> None:
        for keys in self._placing.values():
            keys.discard(key)

    def _candidates(self) -> list[Candidate]:
        return [
            Candidate(
                name=worker.name,
                connected=worker.connected,
                cordoned=worker.cordoned,
                active=worker.active_mirrors() + len(self._placing.get(worker.name, ())),
            )
            for worker in self._pool.workers()
        ]

    async def _place(
        self, job: Obj, *, excluded: frozenset[str] = frozenset()
    ) -> tuple[Obj | None, float]:
        """Choose a worker and record it on the Job, returning the updated Job;
        (None, retry delay) when none fits or the Job changed meanwhile."""
        key = object_key(job)
        adopted = [
            worker.name
            for worker, mirror in self._pool.mirrors_of(key)
            if is_mirror_of(mirror, job, self._options.controller_name)
        ]
        if adopted:
            # A mirror of this very Job exists (its placement annotation was lost): keep it.
            cluster = adopted[0]
        else:
            decision = place(self._candidates(), excluded=excluded)
            if decision.cluster is None:
                message = f"no worker cluster can take this Job: {decision.explain()}"
                self._events.record(job, "Warning", "NoWorkerAvailable", message)
                _log.warning("%s: %s", key, message, extra={"job": key})
                return None, self._options.unplaceable_retry
            cluster = decision.cluster
        # Reserve before the first await: concurrent placements must see this one.
        self._reserve(cluster, key)
        try:
            placed = await self._manager.patch(
                JOBS,
                str(_meta(job).get("name")),
                # The resourceVersion makes this a compare-and-swap: a Job is placed once.
                {"metadata": {"resourceVersion": _meta(job).get("resourceVersion"),
                              "annotations": {CLUSTER_ANNOTATION: cluster}}},
                namespace=str(_meta(job).get("namespace")),
            )  # fmt: skip
        except ApiError as error:
            self._release(key)
            if error.is_conflict or error.is_not_found:
                return None, _CONFLICT_RETRY
            raise
        except BaseException:
            self._release(key)
            raise
        _log.info("placed %s on %s", key, cluster, extra={"job": key, "cluster": cluster})
        return placed, 0.0

    # -- the mirror ---------------------------------------------------------------

    async def _create_mirror(self, worker: Worker, job: Obj) -> tuple[Obj | None, float]:
        key = object_key(job)
        body = build_mirror(
            job, controller_name=self._options.controller_name, origin=self._options.origin
        )
        namespace = str(_meta(job).get("namespace"))
        for attempt in range(2):
            try:
                created = await worker.client.create(JOBS, body)
            except ApiError as error:
                if error.is_already_exists:
                    return await self._resolve_existing(worker, job)
                if error.is_not_found and attempt == 0 and self._options.create_namespaces:
                    await self._ensure_namespace(worker.client, namespace)
                    continue
                return None, self._rejected(worker, job, error)
            self._created.expect((worker.name, key, str(_meta(job).get("uid"))))
            self._events.record(
                job, "Normal", "Dispatched", f"Dispatched to worker cluster {worker.name}"
            )
            _log.info(
                "created mirror of %s on %s",
                key,
                worker.name,
                extra={"job": key, "cluster": worker.name},
            )
            return created, 0.0
        return None, self._options.rejected_retry

    async def _resolve_existing(self, worker: Worker, job: Obj) -> tuple[Obj | None, float]:
        """A Job of this name already exists on the worker: ours, stale, or someone else's."""
        name, namespace = str(_meta(job).get("name")), str(_meta(job).get("namespace"))
        try:
            existing = await worker.client.get(JOBS, name, namespace=namespace)
        except ApiError as error:
            if error.is_not_found:
                return None, _CONFLICT_RETRY  # deleted meanwhile: try again
            raise
        if is_mirror_of(existing, job, self._options.controller_name):
            return existing, 0.0  # ours: created by an earlier pass the cache has not shown yet
        if is_ours(existing, self._options.controller_name):
            await self._delete_mirror(
                worker, existing, why="it belongs to an earlier Job of this name"
            )
            return None, _CONFLICT_RETRY
        # Someone else's Job: never touch it; move this Job to another worker.
        message = (
            f"worker cluster {worker.name} already has a Job {namespace}/{name} that jobrelay did not "
            "create; it is left alone and this Job is placed elsewhere"
        )
        self._events.record(job, "Warning", "NameCollision", message)
        _log.warning(message, extra={"job": f"{namespace}/{name}", "cluster": worker.name})
        excluded = await self._clusters_with_foreign_job(name, namespace)
        return await self._replace(job, worker.name, excluded)

    async def _replace(
        self, job: Obj, old_cluster: str, excluded: frozenset[str]
    ) -> tuple[Obj | None, float]:
        """Move an unstarted Job off ``old_cluster`` (it holds no mirror of ours there)."""
        self._release(object_key(job))
        fresh = await self._manager.get(
            JOBS, str(_meta(job).get("name")), namespace=str(_meta(job).get("namespace"))
        )
        if (_meta(fresh).get("annotations") or {}).get(CLUSTER_ANNOTATION) != old_cluster:
            return None, _CONFLICT_RETRY
        placed, retry = await self._place(fresh, excluded=excluded | {old_cluster})
        # The next pass creates the mirror on the new cluster, from a cache that shows the move.
        return None, retry if placed is None else _CONFLICT_RETRY

    async def _clusters_with_foreign_job(self, name: str, namespace: str) -> frozenset[str]:
        found = set()
        for worker in self._pool.workers():
            if not worker.connected:
                continue
            try:
                existing = await worker.client.get(JOBS, name, namespace=namespace)
            except ApiError:
                continue
            if not is_ours(existing, self._options.controller_name):
                found.add(worker.name)
        return frozenset(found)

    async def _fresh(self, job: Obj) -> Obj | None:
        try:
            return slim_job(
                await self._manager.get(
                    JOBS, str(_meta(job).get("name")), namespace=str(_meta(job).get("namespace"))
                )
            )
        except ApiError as error:
            if error.is_not_found:
                return None
            raise

    async def _ensure_namespace(self, client: ApiClient, namespace: str) -> None:
        try:
            await client.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
            _log.info(
                "created namespace %s on %s",
                namespace,
                client.cluster,
                extra={"cluster": client.cluster},
            )
        except ApiError as error:
            if not error.is_already_exists:
                raise

    def _rejected(self, worker: Worker, job: Obj, error: ApiError) -> float:
        key = object_key(job)
        if error.is_not_found:
            message = (
                f"worker cluster {worker.name} has no namespace {_meta(job).get('namespace')} "
                "(and namespace creation is turned off): create it there"
            )
        elif error.is_unreachable:
            message = f"worker cluster {worker.name} is unreachable: {error.message}"
        else:
            message = f"worker cluster {worker.name} rejected the mirror Job (HTTP {error.code} {error.reason}): {error.message}"
        self._events.record(job, "Warning", "MirrorRejected", message)
        _log.warning(message, extra={"job": key, "cluster": worker.name})
        return self._options.rejected_retry

    async def _sync_spec(self, worker: Worker, job: Obj, mirror: Obj) -> None:
        patch = mirror_spec_patch(job, mirror)
        if patch is None:
            return
        await worker.client.patch(
            JOBS,
            str(_meta(mirror).get("name")),
            patch,
            namespace=str(_meta(mirror).get("namespace")),
        )
        if "suspend" in (patch.get("spec") or {}):
            verb = "Suspended" if is_suspended(job) else "Resumed"
            self._events.record(
                job, "Normal", verb, f"{verb} the mirror on worker cluster {worker.name}"
            )

    async def _delete_mirror(self, worker: Worker, mirror: Obj, *, why: str) -> None:
        name, namespace = str(_meta(mirror).get("name")), str(_meta(mirror).get("namespace"))
        mirror_uid = str(_meta(mirror).get("uid"))
        if self._deleted.pending(mirror_uid):
            return  # deleted by an earlier pass; the cache has not caught up yet
        try:
            await worker.client.delete(JOBS, name, namespace=namespace, uid=mirror_uid)
        except ApiError as error:
            if error.is_not_found or error.is_conflict:
                self._deleted.expect(mirror_uid)
                return  # already gone, or already replaced by another object
            raise
        self._deleted.expect(mirror_uid)
        _log.info("deleted mirror %s/%s on %s: %s", namespace, name, worker.name, why,
                  extra={"job": f"{namespace}/{name}", "cluster": worker.name})  # fmt: skip

    async def _delete_mirrors(self, key: str, *, keep_uid: str | None, why: str) -> None:
        for worker, mirror in self._pool.mirrors_of(key):
            if keep_uid is not None and _origin_uid(mirror) == keep_uid:
                continue
            if _meta(mirror).get("deletionTimestamp"):
                continue
            await self._delete_mirror(worker, mirror, why=why)

    # -- status ----------------------------------------------------------------

    async def _write_status(self, job: Obj, status: Obj | None) -> Obj | None:
        """Write the Job's status (compare-and-swap on its resourceVersion).

        Returns the Job as it now stands (unchanged when there was nothing to
        write), or None after a conflict.
        """
        if status is None:
            return job
        proposed = {**job, "status": status}
        violations = status_violations(job, proposed)
        if violations:
            # The apiserver would answer 422: a bug in the translation, never the user's.
            key = object_key(job)
            _log.error("refusing to write a status that breaks the Job API rules: %s", "; ".join(violations),
                       extra={"job": key})  # fmt: skip
            return job
        # A merge patch of the status subresource, not a PUT: a PUT of /status
        # replaces the Job's labels and annotations too. The resourceVersion
        # makes it a compare-and-swap against the status we computed from.
        patch = {
            "metadata": {"resourceVersion": _meta(job).get("resourceVersion")},
            "status": merge_patch(job.get("status") or {}, status),
        }
        try:
            return slim_job(
                await self._manager.patch(
                    JOBS, str(_meta(job).get("name")), patch,
                    namespace=str(_meta(job).get("namespace")), subresource="status",
                )
            )  # fmt: skip
        except ApiError as error:
            if error.is_conflict or error.is_not_found:
                return None
            raise

    def _announce_finish(self, job: Obj, cluster: str) -> None:
        final = finished_condition(job) or {}
        if final.get("type") == COMPLETE:
            self._events.record(
                job, "Normal", "Completed", f"Completed on worker cluster {cluster}"
            )
        elif final.get("type") == FAILED:
            self._events.record(
                job, "Warning", "Failed",
                f"Failed on worker cluster {cluster}: {final.get('reason', '')} {final.get('message', '')}".strip(),
            )  # fmt: skip


def _cluster_of(job: Mapping[str, Any]) -> str:
    return str((_meta(job).get("annotations") or {}).get(CLUSTER_ANNOTATION, ""))


def _has_run(job: Mapping[str, Any]) -> bool:
    status = job.get("status") or {}
    return bool(status.get("startTime") or status.get("succeeded") or status.get("failed"))
