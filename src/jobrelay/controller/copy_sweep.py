"""The sweep of orphaned dependency copies on the workers.

A copy is owned by the mirrors that use it, and the worker's garbage collector
deletes it when its last mirror goes. One that no mirror owns (its mirror's create
failed after the copy was made, or a controller restarted in between) is deleted
here, once it is older than a grace period: a copy is made just before its mirror,
and one that a create is about to own must not go. The delete carries the copy's
UID as a precondition (never a namesake made since). Run by the leader with each
resync (every --gc-interval).
"""

from __future__ import annotations

import datetime
import logging

from jobrelay.dependencies.copy_rules import RESOURCES
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.meta import Meta

__all__ = ["ORPHAN_GRACE", "sweep_orphan_copies"]

_log = logging.getLogger(__name__)

# Seconds an unowned copy is left alone: far longer than a mirror's create takes.
ORPHAN_GRACE = 300.0


def _age(timestamp: str, now: datetime.datetime) -> float:
    try:
        created = datetime.datetime.fromisoformat(timestamp)
    except ValueError:
        return 0.0
    return (now - created).total_seconds()


async def sweep_orphan_copies(pool: WorkerPool, grace: float = ORPHAN_GRACE) -> int:
    """Delete every copy of ours on a connected worker that no mirror owns and that is
    older than ``grace``; how many were deleted. Errors are logged, never raised."""
    now = datetime.datetime.now(datetime.UTC)
    deleted = 0
    for worker in pool.workers():
        if not worker.connected:
            continue
        for kind, copy in list(worker.dependency_feed.copies()):
            meta = Meta(copy)
            if meta.owner_references or _age(meta.creation_timestamp, now) < grace:
                continue
            try:
                await worker.client.delete(
                    RESOURCES[kind], meta.name, namespace=meta.namespace, uid=meta.uid
                )
            except ApiError as error:
                if not (error.is_not_found or error.is_conflict):
                    _log.warning("worker %s: cannot delete the orphaned copy %s/%s: %s",
                                 worker.name, kind, meta.key, error.message)  # fmt: skip
                continue
            deleted += 1
            _log.info("worker %s: deleted the orphaned copy %s %s (no mirror uses it)",
                      worker.name, kind, meta.key, extra={"cluster": worker.name})  # fmt: skip
    return deleted
