"""Small helpers for tests that drive real apiservers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS
from jobrelay.vocabulary.resource import Resource

Obj = dict[str, Any]
T = TypeVar("T")


def job_manifest(
    name: str,
    *,
    completions: int = 1,
    parallelism: int = 1,
    backoff_limit: int = 6,
    annotations: Mapping[str, str] | None = None,
    managed_by: str | None = None,
    cpu: str = "100m",
    **spec: Any,
) -> Obj:
    """A batch/v1 Job whose pods KWOK runs according to ``annotations``."""
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {
                    "annotations": {"fleet.jobrelay.dev/duration": "200ms", **(annotations or {})}
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                },
            },
            **spec,
        },
    }
    if managed_by:
        body["spec"]["managedBy"] = managed_by
    return body


def condition(obj: Mapping[str, Any], kind: str) -> Obj | None:
    for entry in obj.get("status", {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return bool(found and found.get("status") == "True")


def finished(obj: Mapping[str, Any]) -> bool:
    return is_true(obj, "Complete") or is_true(obj, "Failed")


async def wait_for(
    client: ApiClient,
    name: str,
    namespace: str,
    predicate: Callable[[Obj], bool],
    *,
    resource: Resource = JOBS,
    timeout: float = 60.0,
    what: str = "condition",
) -> Obj:
    """Poll until ``predicate`` holds for the object (tests only: controllers watch)."""
    deadline = time.monotonic() + timeout
    last: Obj | None = None
    while time.monotonic() < deadline:
        try:
            last = await client.get(resource, name, namespace=namespace)
        except ApiError as error:
            if not error.is_not_found:
                raise
        else:
            if predicate(last):
                return last
        await asyncio.sleep(0.2)
    raise AssertionError(
        f"{resource.kind} {namespace}/{name}: timed out waiting for {what}; last: {last}"
    )


async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Poll the coroutine ``check`` until it returns something other than None or False."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result is not None and result is not False:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)


class WatchRecorder:
    """Every version of the objects of one kind that a list+watch delivers (tests only).

    Deliberately not built on ``jobrelay.kube.watching.Informer``: the tests use
    it as the judge of what the controller did (e.g. "one mirror ever"), so it
    must not share the code under test.

    ``start()`` lists first and returns only once the watch is about to begin
    from that list's resourceVersion, so nothing created afterwards is missed.
    The watch is re-opened from the last resourceVersion seen when the server
    ends it; on 410 Gone it relists (``relists`` counts these gaps, during
    which short-lived versions may have been missed).
    """

    def __init__(
        self,
        client: ApiClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        # (event type, object); the type is LISTED for objects from a (re)list.
        self.events: list[tuple[str, Obj]] = []
        # When each event arrived (time.monotonic()), in step with ``events``.
        self.received: list[float] = []
        self.relists = 0
        self.errors: list[ApiError] = []
        self._resource_version = ""
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def start(self) -> WatchRecorder:
        await self._relist()
        self._task = asyncio.create_task(self._run(), name=f"watch {self.resource.plural}")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def __aenter__(self) -> WatchRecorder:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def versions(self, uid: str) -> list[Obj]:
        """Every version seen of the object with this uid, oldest first (the last may be DELETED)."""
        return [obj for _, obj in self.events if obj.get("metadata", {}).get("uid") == uid]

    def deleted(self, uid: str) -> bool:
        return any(
            kind == "DELETED" and obj.get("metadata", {}).get("uid") == uid
            for kind, obj in self.events
        )

    def objects(self) -> dict[str, Obj]:
        """The last version seen of every object ever seen, by uid (deleted ones included)."""
        latest: dict[str, Obj] = {}
        for _, obj in self.events:
            latest[obj.get("metadata", {}).get("uid", "")] = obj
        return latest

    async def wait(self, predicate: Callable[[], T | None], *, timeout: float = 30.0) -> T:
        """Until ``predicate()`` (evaluated on what was recorded) is neither None nor False."""
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result is not None and result is not False:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"watch on {self.resource.plural} in {self.namespace}: timed out after "
                    f"{timeout:.0f}s ({len(self.events)} events recorded)"
                )
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 1.0))

    def _record(self, kind: str, obj: Obj) -> None:
        self.events.append((kind, obj))
        self.received.append(time.monotonic())
        self._changed.set()

    async def _relist(self) -> None:
        listed = await self.client.list(
            self.resource, namespace=self.namespace, label_selector=self.label_selector
        )
        for item in listed.items:
            self._record("LISTED", item)
        self._resource_version = listed.resource_version

    async def _run(self) -> None:
        while True:
            try:
                async with self.client.watch(
                    self.resource,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    resource_version=self._resource_version,
                    timeout_seconds=60,
                ) as stream:
                    async for event in stream:
                        version = event.object.get("metadata", {}).get("resourceVersion")
                        if event.type == "ERROR":
                            raise ApiError.from_status(event.object)
                        if version:
                            self._resource_version = str(version)
                        if event.type != "BOOKMARK":
                            self._record(event.type, event.object)
            except ApiError as error:
                if error.is_gone:
                    self.relists += 1
                    try:
                        await self._relist()
                    except ApiError as relist_error:
                        self.errors.append(relist_error)
                        await asyncio.sleep(0.2)
                else:
                    self.errors.append(error)
                    await asyncio.sleep(0.2)


async def get_or_none(
    client: ApiClient, resource: Resource, name: str, namespace: str | None
) -> Obj | None:
    """The object, or None when the apiserver says it is not there."""
    try:
        return await client.get(resource, name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            return None
        raise


async def exists(client: ApiClient, resource: Resource, name: str, namespace: str | None) -> bool:
    return await get_or_none(client, resource, name, namespace) is not None


async def gone(client: ApiClient, resource: Resource, name: str, namespace: str | None) -> bool:
    return await get_or_none(client, resource, name, namespace) is None


RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)


async def refuse_jobs(client: ApiClient, namespace: str) -> None:
    """A quota of no Jobs in ``namespace`` (a worker then refuses every mirror there with
    403 exceeded quota), enforced before this returns."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-jobs"},
        "spec": {"hard": {"count/jobs.batch": "0"}},
    }
    await client.create(RESOURCE_QUOTAS, quota, namespace=namespace)
    await wait_for(client, "no-jobs", namespace,
                   lambda quota: bool(quota.get("status", {}).get("hard")),
                   resource=RESOURCE_QUOTAS, what="quota enforced")  # fmt: skip


SOURCE = Path(__file__).resolve().parents[1] / "src"


async def jobrelay_cli(kubeconfig: Path, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    """`python -m jobrelay ARGS` of this checkout as a user runs it, with only $KUBECONFIG
    naming ``kubeconfig``: its exit code, stdout and stderr."""
    env = {**os.environ, "PYTHONPATH": str(SOURCE), "KUBECONFIG": str(kubeconfig)}
    env.pop("JOBRELAY_KUBECONFIG", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(timeout):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
