"""The job stand-in at work on one light worker: informers on its Jobs, pods and nodes,
a queue of Jobs and pods to look at, each Job's plan (job_rules.py) and each pod's next
step (pod_rules.py) carried out through ``jobrelay.kube.client.ApiClient``: pods made
and deleted, pod and Job statuses written through /status with the object's
resourceVersion (a conflict is looked at again). A deleted Job's pods are deleted here:
a light worker has no garbage collector."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, NODES, PODS
from jobrelay.kube.watching import Change, Informer, InformerEvent
from jobrelay.localfleet.jobstandin.job_rules import plan_job
from jobrelay.localfleet.jobstandin.pod_rules import pod_step
from jobrelay.vocabulary.resource import Resource

_log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
JOB, POD = "job", "pod"
# The finalizers the garbage collector would work off a Job deleted in the foreground or
# orphaning: here its pods are deleted (or not) and the finalizer removed.
GC_FINALIZERS = ("foregroundDeletion", "orphan")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _controller_uid(pod: dict[str, Any]) -> str | None:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller") and owner.get("kind") == JOBS.kind:
            return str(owner.get("uid"))
    return None


class JobStandinDriver:
    """Runs the Jobs of the cluster of ``client`` until stopped. ``written`` counts status
    writes, ``made`` pods made; ``refused`` lists what the apiserver refused (a test fails
    on any)."""

    def __init__(self, client: ApiClient, *, clock: Callable[[], datetime.datetime] = _now):
        self.client = client
        self.clock = clock
        self.written = 0
        self.made = 0
        self.refused: list[str] = []
        self.jobs = Informer(client, JOBS)
        self.pods = Informer(client, PODS)
        self.nodes = Informer(client, NODES)
        # Pods by their controlling Job's UID (namespace/name keys).
        self._pods_of: dict[str, set[str]] = {}
        # When each pod (by UID) was made Running, to the microsecond.
        self._started: dict[str, datetime.datetime] = {}
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._deletions: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.jobs.add_handler(self._on_job)
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        for informer in (self.nodes, self.pods, self.jobs):
            informer.start()
        for informer in (self.nodes, self.pods, self.jobs):
            await informer.wait_synced()
        self._task = asyncio.create_task(self._work(), name=f"job stand-in {self.client.cluster}")
        # Pods whose Job went while nobody watched.
        job_uids = {str(job["metadata"].get("uid")) for job in self.jobs.values()}
        for uid in set(self._pods_of) - job_uids:
            await self._delete_pods_of(uid)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for informer in (self.jobs, self.pods, self.nodes):
            await informer.stop()

    async def __aenter__(self) -> JobStandinDriver:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def wait(self) -> None:
        if self._task is not None:
            await self._task

    # -- events ------------------------------------------------------------------------

    def _on_job(self, event: InformerEvent) -> None:
        if event.change is Change.DELETED:
            uid = str((event.obj.get("metadata") or {}).get("uid"))
            task = asyncio.get_running_loop().create_task(self._delete_pods_of(uid))
            # Held until done: the loop keeps only a weak reference to a task.
            self._deletions.add(task)
            task.add_done_callback(self._deletions.discard)
        else:
            self._enqueue(JOB, event.key)

    def _on_pod(self, event: InformerEvent) -> None:
        uid = _controller_uid(event.obj)
        if uid is not None:
            keys = self._pods_of.setdefault(uid, set())
            if event.change is Change.DELETED:
                keys.discard(event.key)
                if not keys:
                    del self._pods_of[uid]
            else:
                keys.add(event.key)
            owner = next(
                (o.get("name") for o in event.obj["metadata"].get("ownerReferences") or []
                 if str(o.get("uid")) == uid), None,
            )  # fmt: skip
            namespace = event.obj["metadata"].get("namespace")
            if owner:
                self._enqueue(JOB, f"{namespace}/{owner}")
        if event.change is Change.DELETED:
            self._started.pop(str(event.obj["metadata"].get("uid")), None)
        else:
            self._enqueue(POD, event.key)

    def _on_node(self, event: InformerEvent) -> None:
        if event.change is not Change.UPDATED:
            for key in self.jobs.keys():  # noqa: SIM118 (a list, not a view)
                self._enqueue(JOB, key)

    def _enqueue(self, kind: str, key: str) -> None:
        if (kind, key) not in self._queued:
            self._queued.add((kind, key))
            self._queue.put_nowait((kind, key))

    def _later(self, seconds: float, kind: str, key: str) -> None:
        asyncio.get_running_loop().call_later(seconds, self._enqueue, kind, key)

    async def _work(self) -> None:
        while True:
            kind, key = await self._queue.get()
            self._queued.discard((kind, key))
            try:
                await (self._drive_job(key) if kind == JOB else self._drive_pod(key))
            except Exception:  # one object's bug must not stop the others
                _log.exception("%s: %s %s", self.client.cluster, kind, key)
                self._later(RETRY_SECONDS, kind, key)

    # -- jobs --------------------------------------------------------------------------

    def _ready_nodes(self) -> list[str]:
        names = []
        for node in self.nodes.values():
            conditions = (node.get("status") or {}).get("conditions") or []
            unschedulable = (node.get("spec") or {}).get("unschedulable")
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            if ready and not unschedulable:
                names.append(str(node["metadata"]["name"]))
        return sorted(names)

    async def _drive_job(self, key: str) -> None:
        job = self.jobs.get(key)
        if job is None:
            return
        meta = job["metadata"]
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            await self._finish_deletion(job, uid)
            return
        pods = [pod for k in self._pods_of.get(uid, ()) if (pod := self.pods.get(k)) is not None]
        plan = plan_job(job, pods, self._ready_nodes(), self.clock())
        namespace = str(meta.get("namespace"))
        for new in plan.make:
            try:
                await self.client.create(PODS, new.body, namespace=namespace)
            except ApiError as error:
                if error.is_already_exists:
                    continue
                if error.is_namespace_terminating or error.is_not_found:
                    return
                self.refused.append(f"pod {namespace}/{new.name}: {error}")
                _log.warning("%s: pod %s/%s refused: %s", self.client.cluster, namespace,
                             new.name, error)  # fmt: skip
                self._later(RETRY_SECONDS, JOB, key)
                return
            self.made += 1
        for name in plan.delete:
            await self._delete_pod(namespace, name)
        if plan.status is not None:
            await self._write_status(JOBS, JOB, key, job, plan.status)

    async def _finish_deletion(self, job: dict[str, Any], uid: str) -> None:
        """A Job deleted with a finalizer the garbage collector owns: its pods go (unless
        orphaned), then the finalizer."""
        meta = job["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if not any(f in GC_FINALIZERS for f in finalizers):
            return
        if "orphan" not in finalizers:
            await self._delete_pods_of(uid)
        kept = [f for f in finalizers if f not in GC_FINALIZERS]
        try:
            await self.client.patch(
                JOBS,
                str(meta["name"]),
                {"metadata": {"finalizers": kept or None,
                              "resourceVersion": meta["resourceVersion"]}},
                namespace=str(meta.get("namespace")),
            )  # fmt: skip
        except ApiError as error:
            if error.is_conflict:
                self._later(0.1, JOB, f"{meta.get('namespace')}/{meta['name']}")
            elif not error.is_not_found:
                raise

    async def _delete_pods_of(self, uid: str) -> None:
        for key in list(self._pods_of.get(uid, ())):
            namespace, _, name = key.partition("/")
            await self._delete_pod(namespace, name)

    async def _delete_pod(self, namespace: str, name: str) -> None:
        # At once (grace 0): no kubelet would ever confirm a graceful deletion.
        try:
            await self.client.delete(PODS, name, namespace=namespace, grace_period_seconds=0)
        except ApiError as error:
            if not error.is_not_found:
                raise

    # -- pods --------------------------------------------------------------------------

    async def _drive_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        uid = str(pod["metadata"].get("uid"))
        step = pod_step(pod, self.clock(), self._started.get(uid))
        if step.remove:
            namespace, _, name = key.partition("/")
            await self._delete_pod(namespace, name)
            return
        if step.recheck_after is not None:
            self._later(step.recheck_after, POD, key)
        if step.status is not None and await self._write_status(PODS, POD, key, pod, step.status):
            if step.status.get("phase") == "Running":
                self._started[uid] = self.clock()
            else:
                self._started.pop(uid, None)

    async def _write_status(
        self, resource: Resource, kind: str, key: str, obj: dict[str, Any], status: dict[str, Any]
    ) -> bool:
        meta = obj["metadata"]
        body = {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            # The whole metadata: a pod's /status takes its labels and annotations as sent.
            "metadata": {key: value for key, value in meta.items() if key != "managedFields"},
            "status": status,
        }
        try:
            await self.client.replace(resource, body, subresource="status")
        except ApiError as error:
            if error.is_not_found:
                return False
            if not error.is_conflict:
                self.refused.append(f"{resource.kind} {key}: {error}")
                _log.warning("%s: %s %s: status refused: %s", self.client.cluster,
                             resource.kind, key, error)  # fmt: skip
            self._later(0.1 if error.is_conflict else RETRY_SECONDS, kind, key)
            return False
        self.written += 1
        return True
