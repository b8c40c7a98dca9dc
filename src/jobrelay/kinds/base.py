"""The one interface every workload kind implements, and what it is made of.

An adapter is pure: it says how a kind looks (group, version, kind, plural),
how a mirror is built from a management object, how the management status
follows the mirror's, what finishes the workload, which spec changes reach a
mirror, what to drop before caching, which pods the workload will ask for, and
which pods on a worker are a mirror's (by UID: :mod:`jobrelay.kinds.pod_ownership`).
Everything that does I/O (caches, writes, Events) is generic and lives in the
controller, which never names a kind (the model: Kueue's MultiKueueAdapter,
with its I/O moved out).
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from jobrelay.kinds.mirrors import LAST_APPLIED_ANNOTATION
from jobrelay.kinds.pod_ownership import OwnerHop, PodOwnerLabels, names_a_uid
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource


class WorkloadKey(NamedTuple):
    """A management object as the work queue keys it: its kind's name and ``namespace/name``."""

    kind: str
    key: str

    @property
    def namespace(self) -> str:
        return self.key.partition("/")[0]

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` pods that each request ``requests`` (quantities as the API writes them)."""

    name: str
    count: int
    requests: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Finish:
    """How a workload ended: ``succeeded`` or not, with the condition's reason and message,
    and when (``at``: the time its status gives, RFC 3339; "" when it gives none; not
    part of how it ended, so two finishes compare by the rest)."""

    succeeded: bool
    reason: str = ""
    message: str = ""
    at: str = field(default="", compare=False)


# Where a kind keeps its managedBy: most at spec.managedBy; Kubeflow's v1 jobs and
# MPIJob v2beta1 inside their run policy.
SPEC_MANAGED_BY = ("spec", "managedBy")
RUN_POLICY_MANAGED_BY = ("spec", "runPolicy", "managedBy")
MANAGED_BY_FIELDS = {".".join(path): path for path in (SPEC_MANAGED_BY, RUN_POLICY_MANAGED_BY)}


def read_path(obj: JsonObj, path: tuple[str, ...]) -> object:
    """The value at ``path`` in ``obj`` (None where any step is missing or not an object)."""
    value: object = obj
    for step in path:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def without_path(obj: JsonObj, path: tuple[str, ...]) -> JsonObj:
    """``obj`` (a copy of its objects along ``path``) without the value at ``path``."""
    if not path or not isinstance(obj, dict):
        return obj
    head, rest = path[0], path[1:]
    if not rest:
        return {k: v for k, v in obj.items() if k != head}
    inner = obj.get(head)
    if not isinstance(inner, dict):
        return obj
    return {**obj, head: without_path(inner, rest)}


class WorkloadKind(abc.ABC):
    """One workload kind jobrelay dispatches. Subclasses are pure and stateless."""

    ref: Resource  # where the kind is served; the API client takes it as it is
    # Where the kind's objects name the controller that runs them.
    managed_by_field: tuple[str, ...] = SPEC_MANAGED_BY
    # Where the kind's objects ask to be deleted some seconds after they finish.
    ttl_after_finished_field: tuple[str, ...] = ("spec", "ttlSecondsAfterFinished")
    # The only managedBy values the kind's CRD accepts (a validation rule in it); ()
    # when it takes any value.
    crd_managed_by_values: tuple[str, ...] = ()
    # What the kind's CRD schema writes at managed_by_field when it is left out (the
    # apiserver defaults it before admission: it says nothing of what the tenant wants).
    crd_managed_by_default: str | None = None

    def managed_by(self, obj: JsonObj) -> str | None:
        """The object's managedBy value at the kind's field (None when unset or not a string)."""
        value = read_path(obj, self.managed_by_field)
        return value if isinstance(value, str) else None

    @property
    def name(self) -> str:
        return self.ref.name

    # -- caching ----------------------------------------------------------------

    def slim_local(self, obj: JsonObj) -> JsonObj:
        """The management object as cached: what jobrelay never reads dropped, managedFields
        (often half its bytes) and ``kubectl apply``'s record of the whole object (a copy
        of its spec: a big workload's bulk twice; no mirror carries it either)."""
        metadata = obj.get("metadata")
        if not metadata:
            return obj
        annotations = metadata.get("annotations")
        applied = isinstance(annotations, Mapping) and LAST_APPLIED_ANNOTATION in annotations
        if "managedFields" not in metadata and not applied:
            return obj
        slim = {k: v for k, v in metadata.items() if k != "managedFields"}
        if applied:
            slim["annotations"] = {
                k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION
            }
        return {**obj, "metadata": slim}

    @abc.abstractmethod
    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        """The mirror as cached: identity, what spec_patch compares, and the status."""

    def cached_mirror(self, obj: JsonObj) -> JsonObj | None:
        """A worker object labelled as a mirror, as cached (:meth:`slim_mirror`); None for
        one that another object controls. jobrelay's mirrors have no controller: such an
        object was made by an operator from one of them, its labels copied (KubeRay's
        RayCluster of a RayJob carries the RayJob's), and is no mirror of ours."""
        if any(ref.get("controller") is True for ref in Meta(obj).owner_references):
            return None
        return self.slim_mirror(obj)

    # -- the mirror --------------------------------------------------------------

    @abc.abstractmethod
    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        """The mirror to create on a worker for run ``run`` of the management object ``obj``.

        A kind that can carry over what earlier runs did (shown in ``obj``'s
        status) records it on the mirror and asks it to run only what remains;
        ``now`` (RFC 3339) dates that record.
        """

    @abc.abstractmethod
    def spec_patch(self, obj: JsonObj, mirror: JsonObj) -> JsonObj | None:
        """A merge patch bringing the mirror's spec in line with ``obj``; None when in step."""

    # -- the status ---------------------------------------------------------------

    @abc.abstractmethod
    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        """The management object's next status, or None when it is already right.

        ``mirror`` is None when no mirror runs (not placed yet, or between two
        runs): the status then shows nothing running, and only what the
        management object itself says (e.g. suspended). ``gone``: ``mirror`` is
        the last state of a mirror that no longer exists (its work counts, its
        pods no longer run). ``now`` is an RFC 3339 time for any timestamp the
        status needs.
        """

    def failed_status(self, obj: JsonObj, reason: str, message: str, *, now: str) -> JsonObj | None:
        """The status that fails the workload for ``reason`` while no mirror runs; None when
        the kind has no way to say so (its workloads then wait instead)."""
        del obj, reason, message, now
        return None

    def is_transitional(self, old: JsonObj, new: JsonObj) -> bool:
        """Whether the status ``new`` (over ``old``) is a step the next one soon carries
        anyway, so its write may wait a moment to be merged with that one (none known)."""
        del old, new
        return False

    def status_violations(self, old: JsonObj, new: JsonObj) -> list[str]:
        """Rules the apiserver would break a write of ``new`` over ``old`` on (none known)."""
        del old, new
        return []

    @abc.abstractmethod
    def finish(self, obj: JsonObj) -> Finish | None:
        """How the workload ended, or None while it has not."""

    def is_finished(self, obj: JsonObj) -> bool:
        return self.finish(obj) is not None

    def ttl_after_finished(self, obj: JsonObj) -> int | None:
        """The seconds after its finish the object asks to be deleted (its own
        ``ttlSecondsAfterFinished``; None when it asks for nothing)."""
        value = read_path(obj, self.ttl_after_finished_field)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        )

    @abc.abstractmethod
    def is_suspended(self, obj: JsonObj) -> bool:
        """Whether the management object asks not to run (not placed while created so)."""

    def has_run(self, obj: JsonObj) -> bool:
        """Whether the status shows the workload ran somewhere (its mirror then held progress)."""
        return bool((obj.get("status") or {}).get("startTime"))

    def shows_running(self, obj: JsonObj) -> bool:
        """Whether the status shows pods running now (a kind that cannot tell: no)."""
        del obj
        return False

    def has_started(self, mirror: JsonObj) -> bool:
        """Whether a mirror's pods have started doing work (a drain moves only those that
        have not)."""
        return self.has_run(mirror)

    # -- placement ----------------------------------------------------------------

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        """The pods the workload will ask for at once (empty when the kind cannot tell)."""
        del obj
        return []

    def pod_templates(self, obj: JsonObj) -> list[JsonObj]:
        """The pod templates the workload's pods are made from, for the manager's admission
        to judge (empty when the kind cannot tell: then nothing is judged)."""
        del obj
        return []

    # -- its pods on the worker -----------------------------------------------------
    #
    # Which pods are a mirror's is decided by UID: the mirror's, or that of an object
    # the mirror controls there (:meth:`owner_hops`). A kind without an adapter of its
    # own: the pods its mirror controls (owner reference), found among the namespace's.

    # The name and UID labels its operator writes on each pod (the capacity tracker
    # counts pods by them, besides their controller owner reference).
    pod_owner_labels: tuple[PodOwnerLabels, ...] = ()
    # Labels its pods carry the UID of an owner in that is not their controller (a JobSet's
    # pods are its child Jobs'): a pod speaks for a mirror by them too.
    pod_uid_labels: tuple[str, ...] = ()
    # The labels that number its pods (`jobrelay logs --index`), the first found wins.
    pod_index_labels: tuple[str, ...] = ()
    # Other labels of its pods jobrelay reads (those its selectors name).
    pod_selector_labels: tuple[str, ...] = ()
    # The resources of every object :meth:`owner_hops` may name: a worker's hop feed
    # watches those its mirrors control, so that their pods count as the mirror's.
    owner_hop_refs: tuple[Resource, ...] = ()

    @property
    def pod_labels(self) -> frozenset[str]:
        """Every label of its pods that jobrelay reads."""
        owners = (key for pair in self.pod_owner_labels for key in (*pair.names, *pair.uids))
        return frozenset(
            (*owners, *self.pod_uid_labels, *self.pod_index_labels, *self.pod_selector_labels)
        )

    def pod_selectors(self, mirror: JsonObj) -> tuple[str, ...]:
        """Label selectors that list, on its worker, every pod that may be the mirror's
        (by the mirror's UID where its pods carry it; else a superset that :meth:`owns`
        narrows). ``""`` lists the namespace's every pod."""
        del mirror
        return ("",)

    def owner_hops(self, mirror: JsonObj) -> tuple[OwnerHop, ...]:
        """The objects its operator makes from the mirror that make some of its pods (read
        on the worker: only those the mirror controls count)."""
        del mirror
        return ()

    def owns(self, pod: Mapping[str, Any], uids: Collection[str]) -> bool:
        """Whether ``pod`` is a mirror's, ``uids`` being the mirror's UID and those of the
        hops it controls: its controller, or one of :attr:`pod_uid_labels`, names one."""
        return names_a_uid(pod, uids, self.pod_uid_labels)

    def made_for(self, made: tuple[str, str], name: str) -> tuple[str, ...]:
        """The names of the mirrors of this kind that an object its operator makes there,
        of ``made`` (API group, kind) and named ``name``, may be made for, longest first
        (a worker Event about it concerns that mirror); none for what it does not make."""
        del made, name
        return ()

    def pod_index(self, pod: Mapping[str, Any]) -> str | None:
        """The number a pod has among the workload's (a completion or replica index)."""
        labels = Meta(pod).labels
        return next((str(labels[key]) for key in self.pod_index_labels if key in labels), None)

    def pods_at_work(self, obj: JsonObj) -> bool:
        """Whether the status shows pods made and at work, or done (a kind that cannot tell:
        no): a worker that says it cannot make them is then no longer believed."""
        del obj
        return False

    def completions(self, obj: JsonObj) -> str:
        """``done/wanted`` as `jobrelay get` prints it; ``-`` when the kind cannot tell."""
        del obj
        return "-"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"
