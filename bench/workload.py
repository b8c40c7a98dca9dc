"""Benchmark Jobs, their namespaces, and the clients that submit them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, NAMESPACES

RUN_LABEL = "bench.jobrelay.dev/run"
DURATION_ANNOTATION = "fleet.jobrelay.dev/duration"
OUTCOME_ANNOTATION = "fleet.jobrelay.dev/outcome"

Obj = dict[str, Any]


@dataclass(frozen=True)
class PodShape:
    duration: str = "1s"  # Go duration, as KWOK reads it
    cpu: str = "10m"
    memory: str = "16Mi"
    outcome: str = "succeed"


def job_manifest(
    name: str,
    namespace: str,
    run: str,
    pod: PodShape,
    *,
    managed_by: str | None,
    suspend: bool = False,
) -> Obj:
    """A one-pod Job that KWOK runs for ``pod.duration`` and then succeeds (or fails)."""
    spec: Obj = {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 0,
        "template": {
            "metadata": {
                "labels": {RUN_LABEL: run},
                "annotations": {
                    DURATION_ANNOTATION: pod.duration,
                    OUTCOME_ANNOTATION: pod.outcome,
                },
            },
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": pod.cpu, "memory": pod.memory}},
                    }
                ],
            },
        },
    }
    if managed_by:
        spec["managedBy"] = managed_by
    if suspend:
        spec["suspend"] = True
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: run}},
        "spec": spec,
    }


# -- namespaces -------------------------------------------------------------------


async def create_namespace(client: ApiClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        await client.create(NAMESPACES, body)
    except ApiError as error:
        if not error.is_already_exists:
            raise


async def delete_namespace(client: ApiClient, name: str, *, timeout: float) -> bool:
    """Delete a namespace and wait until it is gone; False if it outlived ``timeout``."""
    try:
        await client.delete(NAMESPACES, name)
    except ApiError as error:
        if error.is_not_found:
            return True
        raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await client.get(NAMESPACES, name)
        except ApiError as error:
            if error.is_not_found:
                return True
            raise
        await asyncio.sleep(1.0)
    return False


# -- submitting ---------------------------------------------------------------------


@dataclass
class SubmitStats:
    """How the submission itself went."""

    sent: int = 0
    ok: int = 0
    retries: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    started: float = float("nan")
    ended: float = float("nan")
    max_lag: float = 0.0  # paced submission: worst delay behind the schedule (s)

    def to_json(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "ok": self.ok,
            "retries": self.retries,
            "errors": self.errors,
            "seconds": self.ended - self.started,
            "rate_per_s": self.ok / (self.ended - self.started)
            if self.ended > self.started
            else float("nan"),
            "max_lag_s": self.max_lag,
        }


Request = Callable[[], Awaitable[object]]
# Called with the index of the item: (time sent, time answered) of its successful request.
OnDone = Callable[[int, float, float], None]

_RETRIES = 5


async def _send(index: int, request: Request, stats: SubmitStats, on_done: OnDone) -> None:
    delay = 0.2
    for attempt in range(_RETRIES + 1):
        sent = time.monotonic()
        stats.sent += 1
        try:
            await request()
        except ApiError as error:
            if error.is_already_exists and attempt > 0:  # a retry after a lost answer
                stats.ok += 1
                on_done(index, sent, time.monotonic())
                return
            reason = f"{error.code} {error.reason}"
            retriable = error.code in (0, 429, 500, 502, 503, 504)
            if not retriable or attempt == _RETRIES:
                stats.errors[reason] = stats.errors.get(reason, 0) + 1
                return
            stats.retries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        stats.ok += 1
        on_done(index, sent, time.monotonic())
        return


async def paced(
    requests: Sequence[Request], rate: float, on_done: OnDone, *, max_in_flight: int = 256
) -> SubmitStats:
    """Send ``requests`` at a steady ``rate`` per second, not waiting for answers to keep pace."""
    stats = SubmitStats(started=time.monotonic())
    limit = asyncio.Semaphore(max_in_flight)
    tasks: set[asyncio.Task[None]] = set()

    async def one(index: int, request: Request) -> None:
        try:
            await _send(index, request, stats, on_done)
        finally:
            limit.release()

    for index, request in enumerate(requests):
        due = stats.started + index / rate
        wait = due - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        await limit.acquire()
        stats.max_lag = max(stats.max_lag, time.monotonic() - due)
        task = asyncio.create_task(one(index, request))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    stats.ended = time.monotonic()
    return stats


async def burst(requests: Sequence[Request], concurrency: int, on_done: OnDone) -> SubmitStats:
    """Send ``requests`` as fast as they are accepted, ``concurrency`` at a time."""
    stats = SubmitStats(started=time.monotonic())
    pending = iter(enumerate(requests))

    async def sender() -> None:
        for index, request in pending:
            await _send(index, request, stats, on_done)

    await asyncio.gather(*(sender() for _ in range(max(1, concurrency))))
    stats.ended = time.monotonic()
    return stats


def create_request(client: ApiClient, body: Obj) -> Request:
    async def request() -> None:
        await client.create(JOBS, body)

    return request


def resume_request(client: ApiClient, name: str, namespace: str) -> Request:
    async def request() -> None:
        await client.patch(JOBS, name, {"spec": {"suspend": False}}, namespace=namespace)

    return request


async def wait_until(
    predicate: Callable[[], bool], *, timeout: float, interval: float = 0.1
) -> bool:
    """Poll a cheap in-memory predicate (the recorder's state); False on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)
    return True
