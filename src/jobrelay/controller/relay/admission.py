"""The manager's admission's verdict on a workload's pods, asked by dry-run and remembered.

A workload's pods are created on a worker, so the manager's Pod Security (or any
other pod policy there) would never see them: before a first placement, and
before any mirror is created, a Pod made from each of its pod templates is
created in its namespace on the manager as a dry run. What is remembered, so
that asking stays cheap:

- an allowed (uid, generation): placement retries of it do not ask again;
- an allowed probe pod, by namespace and a digest of its bytes (a tenant's pod may
  be large: the cache holds 32 bytes of it), for ``ALIKE_ALLOWED_FOR`` seconds: a burst of workloads from one template is asked about once, not once
  each. A change of the namespace's labels asks again at once; a new LimitRange,
  quota or webhook is seen within that bound.

A refusal is never remembered: the next placement attempt asks again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import msgspec

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS
from jobrelay.placement.admission_probes import (
    ALLOWED,
    AdmissionVerdict,
    probe_pods,
    verdict_of_refusal,
)
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta

__all__ = ["ALIKE_ALLOWED_FOR", "Admission", "probe_digest"]

# Allowed (uid, generation) pairs kept: enough for a burst of new workloads.
_ADMITTED_REMEMBERED = 10_000
# How long an allowed probe pod answers for identical ones in its namespace (seconds).
ALIKE_ALLOWED_FOR = 10.0
_ALIKE_REMEMBERED = 1024


def probe_digest(pod: JsonObj) -> bytes:
    """The key of a probe pod in the cache: SHA-256 of its canonical JSON (keys sorted),
    so that a tenant's big pod costs the cache a fixed 32 bytes."""
    return hashlib.sha256(msgspec.json.encode(pod, order="sorted")).digest()


class Admission:
    """Asks the manager's admission about workloads' pods (see the module doc)."""

    def __init__(
        self, manager: ApiClient, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._manager = manager
        self._monotonic = monotonic
        # (uid, generation) of workloads whose pods were allowed, oldest first.
        self._admitted: dict[tuple[str, object], None] = {}
        # Probe pods allowed, by namespace and the digest of their bytes, with when
        # (monotonic), oldest first; at most _ALIKE_REMEMBERED.
        self._allowed_alike: dict[tuple[str, bytes], float] = {}

    def namespace_changed(self, namespace: str) -> None:
        """Its labels (Pod Security levels) may have changed: its pods are asked about anew."""
        for alike in [a for a in self._allowed_alike if a[0] == namespace]:
            del self._allowed_alike[alike]

    async def verdict(self, kind: WorkloadKind, obj: JsonObj) -> AdmissionVerdict:
        """The manager's admission's verdict on the workload's pods: a dry-run create of a
        Pod from each pod template in its namespace. An allowed generation is remembered;
        a refusal is asked again on the next placement attempt."""
        meta = Meta(obj)
        remembered = (meta.uid, meta.generation)
        if remembered in self._admitted:
            return ALLOWED
        namespace = meta.namespace
        for pod in probe_pods(kind.pod_templates(obj), namespace):
            alike = (namespace, probe_digest(pod))
            allowed_at = self._allowed_alike.get(alike)
            if allowed_at is not None and self._monotonic() - allowed_at < ALIKE_ALLOWED_FOR:
                continue
            try:
                await self._manager.create(PODS, pod, dry_run=True)
            except ApiError as error:
                verdict = verdict_of_refusal(error.code, error.reason, error.message)
                if verdict is None:
                    raise  # not an answer about admission (a time-out, a 5xx): retried
                if not verdict.allowed:
                    return verdict
            self._remember_alike(alike)
        self._admitted[remembered] = None
        while len(self._admitted) > _ADMITTED_REMEMBERED:
            self._admitted.pop(next(iter(self._admitted)))
        return ALLOWED

    def _remember_alike(self, alike: tuple[str, bytes]) -> None:
        """``alike`` allowed now, the newest; the oldest forgotten past the bound."""
        self._allowed_alike.pop(alike, None)
        self._allowed_alike[alike] = self._monotonic()
        while len(self._allowed_alike) > _ALIKE_REMEMBERED:
            self._allowed_alike.pop(next(iter(self._allowed_alike)))
