"""A manager namespace's ResourceQuota, counted against its delegated workloads.

Their pods never run on the manager, so the apiserver's quota never sees them: jobrelay
counts the requests (and limits) of the namespace's admitted delegated workloads against
the quota's hard values and holds a workload that would take them above. Read: ``cpu``
and ``requests.cpu`` (likewise any resource) are requests, ``limits.*`` are limits,
``count/jobs.batch`` counts Jobs; the other hard values (pods, services, storage claims)
are the apiserver's own business. A hard value that cannot be read is left out and said
(the caller logs it), never guessed. Several quotas in a namespace: the lowest hard
value of each name holds, as the apiserver enforces every one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from jobrelay.admission.queue_model import Entry, QueueHold
from jobrelay.placement.units import Resources, format_units, to_units
from jobrelay.vocabulary.quantity import QuantityError

__all__ = [
    "EXCEEDS_NAMESPACE_QUOTA",
    "JOBS_COUNT",
    "NAMESPACE_QUOTA_EXCEEDED",
    "NamespaceLimits",
    "NamespaceUsage",
    "quota_check",
    "quota_verdict",
    "read_hard",
]

NAMESPACE_QUOTA_EXCEEDED: Final = "NamespaceQuotaExceeded"  # would exceed it now
EXCEEDS_NAMESPACE_QUOTA: Final = "ExceedsNamespaceQuota"  # could never fit, even alone
JOBS_COUNT: Final = "count/jobs.batch"
# Standard resources whose plain name in a quota means their requests.
_PLAIN_REQUESTS = frozenset({"cpu", "memory", "ephemeral-storage"})


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    """The hard values that bind delegated workloads, in placement's units."""

    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    jobs: int | None = None
    # One sentence per hard value left out because it cannot be read (for a Log).
    problems: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requests and not self.limits and self.jobs is None


def _lowest(into: dict[str, int], name: str, value: int) -> None:
    into[name] = min(value, into.get(name, value))


def read_hard(*hards: Mapping[str, str | int]) -> NamespaceLimits:
    """The hard values (``spec.hard`` of each ResourceQuota of one namespace) read."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    jobs: int | None = None
    problems: list[str] = []
    for hard in hards:
        for key, quantity in sorted(hard.items()):
            if key == JOBS_COUNT:
                target, resource = None, "count"
            elif key.startswith("requests."):
                target, resource = requests, key.removeprefix("requests.")
            elif key.startswith("limits."):
                target, resource = limits, key.removeprefix("limits.")
            elif key in _PLAIN_REQUESTS:
                target, resource = requests, key
            else:
                continue
            if target is requests and resource == "storage":
                continue  # what PersistentVolumeClaims request, not pods
            try:
                value = to_units(resource if target is not None else "count", str(quantity))
            except QuantityError as error:
                problems.append(f"ResourceQuota hard {key}: {quantity!r} is left out ({error})")
                continue
            if target is None:
                jobs = value if jobs is None else min(jobs, value)
            else:
                _lowest(target, resource, value)
    return NamespaceLimits(requests, limits, jobs, tuple(problems))


def _is_job(entry: Entry) -> bool:
    return entry.key.startswith("Job ")


def _check(
    kind: str, hard: Resources, used: Mapping[str, int], asked: Resources, namespace: str
) -> QueueHold | None:
    """The first resource (by name) ``asked`` cannot have: never, then not now."""
    for resource in sorted(hard):
        want = asked.get(resource, 0)
        if want <= 0:
            continue
        limit = hard[resource]
        shown = f"{format_units(resource, limit)} {resource}"
        if want > limit:
            return QueueHold(
                EXCEEDS_NAMESPACE_QUOTA,
                f"namespace {namespace}: it {kind} {format_units(resource, want)} {resource}, "
                f"more than the namespace's ResourceQuota allows at all ({kind}.{resource}: "
                f"{format_units(resource, limit)}): ask less, or ask an admin to raise it",
            )
        total = used.get(resource, 0) + want
        if total > limit:
            return QueueHold(
                NAMESPACE_QUOTA_EXCEEDED,
                f"namespace {namespace}: {format_units(resource, total)} of {shown} "
                f"{kind} with the admitted workloads (ResourceQuota {kind}.{resource}); "
                f"it waits until some finish",
            )
    return None


@dataclass(slots=True)
class NamespaceUsage:
    """What a namespace's admitted delegated workloads take, summed as they are added."""

    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    jobs: int = 0

    def add(self, entry: Entry) -> None:
        for resource, value in entry.requests.items():
            self.requests[resource] = self.requests.get(resource, 0) + value
        for resource, value in entry.limits.items():
            self.limits[resource] = self.limits.get(resource, 0) + value
        self.jobs += _is_job(entry)


def quota_check(limits: NamespaceLimits, used: NamespaceUsage, entry: Entry) -> QueueHold | None:
    """Why ``entry`` may not join ``used`` under ``limits`` (None: it may). Never-fitting
    is said before not-now, whatever the resource."""
    if limits.empty:
        return None
    never = [
        _check("requests", limits.requests, {}, entry.requests, entry.namespace),
        _check("limits", limits.limits, {}, entry.limits, entry.namespace),
    ]
    if limits.jobs is not None and _is_job(entry) and limits.jobs < 1:
        never.append(
            QueueHold(
                EXCEEDS_NAMESPACE_QUOTA,
                f"namespace {entry.namespace}: its ResourceQuota allows no Jobs "
                f"({JOBS_COUNT}: {limits.jobs})",
            )
        )
    for verdict in never:
        if verdict is not None:
            return verdict
    now = _check("requests", limits.requests, used.requests, entry.requests, entry.namespace)
    now = now or _check("limits", limits.limits, used.limits, entry.limits, entry.namespace)
    if now is None and limits.jobs is not None and _is_job(entry):
        jobs = used.jobs + 1
        if jobs > limits.jobs:
            now = QueueHold(
                NAMESPACE_QUOTA_EXCEEDED,
                f"namespace {entry.namespace}: {jobs} of {limits.jobs} Jobs with the "
                f"admitted ones (ResourceQuota {JOBS_COUNT}); it waits until some finish",
            )
    return now


def quota_verdict(
    hard: NamespaceLimits | Mapping[str, str | int], admitted: Sequence[Entry], entry: Entry
) -> QueueHold | None:
    """Why ``entry`` may not be admitted beside ``admitted`` (the namespace's admitted
    delegated workloads; ``entry`` itself among them is not counted twice) under
    ``hard``, or None when it may."""
    limits = hard if isinstance(hard, NamespaceLimits) else read_hard(hard)
    used = NamespaceUsage()
    for other in admitted:
        if other.key != entry.key:
            used.add(other)
    return quota_check(limits, used, entry)
