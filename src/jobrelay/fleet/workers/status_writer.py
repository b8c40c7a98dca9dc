"""The WorkerCluster status writer: Connected, activeMirrors, lostTime, capacity.

Only the controller writes a ``WorkerCluster``'s status, on a change and, for
a connected worker, once a heartbeat; a standby replica (the write fence shut)
writes nothing. When to write is pure (:mod:`~jobrelay.fleet.workers.status_rules`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobrelay.fleet.cluster_profiles import ClusterProfileSource
from jobrelay.fleet.workers.record import Worker, WorkerRecord
from jobrelay.fleet.workers.status_rules import (
    Written,
    connected_condition,
    needs_write,
    replacing,
    transition_time,
)
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import WORKER_CLUSTERS
from jobrelay.vocabulary.meta import Meta

__all__ = ["StatusWriter"]
from jobrelay.vocabulary.timestamps import rfc3339

_log = logging.getLogger(__name__)


class StatusWriter:
    """Writes each worker's ``WorkerCluster`` status on the manager."""

    def __init__(
        self,
        manager: ApiClient,
        *,
        origin: str,
        status_interval: float,
        write_fence: Callable[[], bool] | None,
        profiles: ClusterProfileSource | None = None,
        conflict: Callable[[str], Mapping[str, Any] | None] = lambda _name: None,
    ) -> None:
        self._manager = manager
        # A profile worker's status is kept beside its profile, never written to it
        # (fleet/cluster_profiles.py); a WorkerCluster may carry a name conflict as well.
        self._profiles = profiles
        self._conflict = conflict
        self._origin = origin
        self._status_interval = status_interval
        self._write_fence = write_fence

    async def write_verdict(self, record: WorkerRecord, registration: Mapping[str, Any]) -> None:
        """Its connection's Connected verdict, active mirrors and capacity."""
        worker = record.worker
        assert worker is not None
        verdict = worker.verdict()
        await self.write(
            record, registration, connected=verdict.connected, reason=verdict.reason,
            message=verdict.message, active=worker.active_mirrors(), worker=worker,
        )  # fmt: skip

    async def write(
        self,
        record: WorkerRecord,
        registration: Mapping[str, Any] | None,
        *,
        connected: bool,
        reason: str,
        message: str,
        active: int | None = None,
        worker: Worker | None = None,
    ) -> None:
        """Write the status on a change, and for a connected worker once a heartbeat."""
        fence = self._write_fence
        fenced = fence is not None and not fence()
        # A profile worker's status is only kept here: a standby keeps it too (its API shows
        # it), but tells nothing.
        profile = self._profiles is not None and self._profiles.owns(registration)
        if fenced and not profile:
            return  # a standby writes nothing; once leading, the next refresh writes it
        wanted: dict[str, Any] = {
            "type": "Connected",
            "status": "True" if connected else "False",
            "reason": reason,
            "message": message,
        }
        version = worker.kubernetes_version if worker is not None else None
        lost_at = record.lost.lost_time()
        lost_time = rfc3339(lost_at) if lost_at is not None else None
        registration = registration or {}
        # The spec (cordon, drain) this status reflects: a drain waits for this to catch up.
        generation = Meta(registration).raw.get("generation")
        generation = generation if isinstance(generation, int) else None
        now = asyncio.get_running_loop().time()
        capacity = self._capacity_status(record, worker, now)
        conflict = self._conflict(record.name)
        others = (dict(conflict),) if conflict else ()
        if capacity is None and not needs_write(
            record.status.written, wanted, active, version, now,
            lost_time=lost_time, observed_generation=generation, others=others,
        ):  # fmt: skip
            return
        existing = connected_condition(registration)
        stamp = rfc3339(time.time())
        stored_conditions = {
            c.get("type"): c for c in (registration.get("status") or {}).get("conditions") or []
        }
        transition = transition_time(existing, wanted["status"], stamp)
        status: dict[str, Any] = {
            "conditions": [{**wanted, "lastTransitionTime": transition}]
            + [
                {
                    **other,
                    "lastTransitionTime": transition_time(
                        stored_conditions.get(other["type"]), other["status"], stamp
                    ),
                }
                for other in others
            ],
            # Which manager's mirrors `jobrelay clusters remove` may delete there.
            "origin": self._origin,
        }
        if active is not None:
            status["activeMirrors"] = active
        if worker is not None and worker.last_contact:
            status["lastContactTime"] = worker.last_contact
        if version:
            status["kubernetesVersion"] = version
        # Null removes it from the stored status once the worker is back.
        status["lostTime"] = lost_time
        if generation is not None:
            status["observedGeneration"] = generation
        if capacity is not None:
            stored = (registration.get("status") or {}).get("capacity")
            status["capacity"] = replacing(stored, capacity)
        try:
            if self._profiles is not None and profile:
                self._profiles.record_status(record.name, status, tell=not fenced)
            else:
                await self._manager.patch(
                    WORKER_CLUSTERS, record.name, {"status": status}, subresource="status"
                )
        except ApiError as error:
            if not error.is_not_found:
                _log.warning("worker %s: cannot write status: %s", record.name, error)
            return
        record.status.written = Written(wanted, active, version, now, lost_time, generation, others)
        if capacity is not None:
            record.status.capacity.written(capacity, now)

    def _capacity_status(
        self, record: WorkerRecord, worker: Worker | None, now: float
    ) -> dict[str, Any] | None:
        """The status.capacity to write now: when it changed, at most once per status
        interval; None when there is nothing new (or nothing known) to write."""
        if worker is None:
            return None
        error = worker.capacity_feed.error_to_log()
        if error is not None:
            _log.warning("worker %s: capacity not known: %s", record.name, error)
        worker.hop_feed.tell_refusals()
        capacity = worker.capacity()
        if capacity is None:
            return None
        summary = capacity.summary.to_status()
        record.status.capacity.interval = self._status_interval
        if not record.status.capacity.due(summary, now):
            return None
        return summary
