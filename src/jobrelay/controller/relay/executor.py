"""The executor: applies a plan's actions, in order, with today's safety rules.

Writes to the management object are compare-and-swaps on the resourceVersion
the decision read; a mirror is deleted only with its UID as precondition; a
missing namespace on a worker is created (when allowed) and the create tried
once more. Our own creates and deletes, and placements, are recorded in the
relay's memory (controller/relay/memory.py: expectations, reservations) until
the caches show them, so the next snapshot does not repeat them. The first action
that fails stops the plan; what the failure means comes back as a
:class:`Stopped` for the reconciler to act on.

It decides nothing: an action names all it writes (the annotations a placement
clears) and what a refusal tells the user (its :class:`IfRefused`); the executor
sorts an apiserver's answer into a :class:`RefusalAnswer` and fills in the facts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobrelay.controller.relay.dependency_copier import DependencyCopier
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.mirror_namespaces import MirrorNamespaces
from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    CopyDependencies,
    CreateMirror,
    DeleteMirror,
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
from jobrelay.controller.relay.provisioning_writes import PROVISIONING_ACTIONS, provisioning_write
from jobrelay.controller.relay.refusal_wording import RefusalAnswer
from jobrelay.fleet import refusals
from jobrelay.fleet.namespace_grants import NamespaceGrants
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.events import EventRecorder
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    DEFAULT_CONTROLLER_NAME,
    PLACEMENTS_ANNOTATION,
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Collided:
    """A create met an object of the same name on ``cluster``: read it and decide again."""

    cluster: str


Stopped = Retry | Terminal | Collided


class RelayObserver(Protocol):
    """What the executor tells the metrics (controller/instrument.py), after each write."""

    def placed(
        self, key: WorkloadKey, obj: JsonObj | None, cluster: str, history: tuple[str, ...]
    ) -> None: ...

    def mirror_created(self, key: WorkloadKey, cluster: str) -> None: ...

    def status_written(
        self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None, status: JsonObj
    ) -> None: ...


@dataclass
class Executor:
    manager: ApiClient
    pool: WorkerPool
    events: EventRecorder
    create_namespaces: bool
    rejected_retry: float
    memory: RelayMemory
    observer: RelayObserver | None = None
    # This manager's origin: mirrors go only into worker namespaces labelled with it.
    origin: str = ""
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # The UID of a manager namespace, as cached (None: not known): a worker namespace made
    # for an earlier one of that name is not used (fleet/namespace_grants.py).
    manager_namespace_uid: Callable[[str], str | None] = lambda namespace: None
    # Copies a workload's ConfigMaps, Secrets and ServiceAccount (dependency_copier.py).
    copier: DependencyCopier = field(init=False)
    # The RoleBindings that let the worker credential copy into an opened namespace.
    grants: NamespaceGrants = field(init=False)
    # The worker namespaces mirrors and copies go into (mirror_namespaces.py).
    namespaces: MirrorNamespaces = field(init=False)

    def __post_init__(self) -> None:
        self.copier = DependencyCopier(
            self.manager, self.memory, self.controller_name, self.origin,
            rejected_retry=self.rejected_retry,
            # The metrics' (controller/instrument.py), when the observer counts copies.
            copied=getattr(self.observer, "dependency_copied", None),
        )  # fmt: skip
        self.grants = NamespaceGrants(self.origin)
        self.namespaces = MirrorNamespaces(
            self.manager, self.create_namespaces, self.origin, self.manager_namespace_uid
        )

    def report(self, key: WorkloadKey, obj: JsonObj | None, terminal: Terminal) -> None:
        """Tell the user what only they can fix (a Warning Event on the object, when it is
        still there), and the operator what a worker answered (the log)."""
        if obj is not None:
            self.events.record(obj, "Warning", terminal.reason, terminal.message)
        detail = f" (it answered: {terminal.detail})" if terminal.detail else ""
        _log.warning("%s: %s%s", key, terminal.message, detail,
                     extra={"job": key.key, "reason": terminal.reason})  # fmt: skip

    async def apply(
        self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None, plan: Plan
    ) -> Stopped | None:
        """Run the plan's actions; the reason it stopped early, or None when all ran."""
        if plan.release:
            self.memory.reservations.mirror_visible(key)
        # The echo of a write the same reconcile goes on from (a placement whose mirror it
        # creates next), or of a status copy that ends the decision, needs no look; the
        # decisions that end with another write (placed elsewhere after a name collision,
        # a status before a move, any annotation) go on from the look their echo brings
        # (own_writes.py).
        echo_skippable = isinstance(plan.outcome, ReadFresh) or not plan.echo_needed
        for action in plan.actions:
            stopped = await self._apply(key, kind, obj, action, echo_skippable=echo_skippable)
            if stopped is not None:
                return stopped
        return None

    async def _apply(
        self,
        key: WorkloadKey,
        kind: WorkloadKind,
        obj: JsonObj | None,
        action: Action,
        *,
        echo_skippable: bool,
    ) -> Stopped | None:
        if isinstance(action, PROVISIONING_ACTIONS):  # claims on capacity (provisioning_writes.py)
            return await provisioning_write(action, self.pool, self.origin, self.namespaces.open)
        extra = {"job": key.key, "kind": kind.ref.kind}
        match action:
            case Place():
                stopped = await self._place(key, kind, action, echo_skippable=echo_skippable)
                if stopped is None and self.observer is not None:
                    self.observer.placed(key, obj, action.cluster, action.history)
                return stopped
            case CopyDependencies():
                return await self._copy_dependencies(action)
            case CreateMirror():
                return await self._create(key, kind, obj, action)
            case PatchMirror():
                return await self._patch_mirror(kind, action)
            case DeleteMirror():
                await self._delete_mirror(kind, action, extra)
            case WriteStatus():
                stopped = await self._write_status(key, kind, action, echo_skippable=echo_skippable)
                if stopped is None and self.observer is not None:
                    self.observer.status_written(key, kind, obj, action.status)
                return stopped
            case Annotate():
                await self._annotate(key, kind, action)
            case RecordEvent():
                if obj is not None:
                    self.events.record(obj, action.type, action.reason, action.message)
            case Log():
                level = logging.WARNING if action.level == "warning" else logging.INFO
                _log.log(level, "%s: %s", key, action.message, extra=extra)
        return None

    async def _place(
        self, key: WorkloadKey, kind: WorkloadKind, action: Place, *, echo_skippable: bool
    ) -> Stopped | None:
        # Reserve before the first await: concurrent placements must see this one.
        self.memory.reservations.reserve(action.cluster, key, action.demand)
        try:
            with self.memory.own_writes.writing(key, echo_skippable=echo_skippable) as write:
                placed = await self.manager.patch(
                    kind.ref,
                    key.name,
                    # The resourceVersion makes this a compare-and-swap: placed once.
                    {
                        "metadata": {
                            "resourceVersion": action.resource_version,
                            "annotations": {
                                CLUSTER_ANNOTATION: action.cluster,
                                PLACEMENTS_ANNOTATION: ",".join(
                                    action.history or (action.cluster,)
                                ),
                                **dict.fromkeys(action.clears),
                                **dict(action.sets),
                            },
                        }
                    },
                    namespace=key.namespace,
                )
                write.answered(Meta(placed).resource_version)
        except ApiError as error:
            self.memory.reservations.release(key)
            if error.is_conflict or error.is_not_found:
                return Retry("the object changed while it was being placed")
            raise
        except BaseException:
            self.memory.reservations.release(key)
            raise
        _log.debug(  # one line per workload: at info they would flood a burst's log
            "placed %s on %s",
            key.key,
            action.cluster,
            extra={"job": key.key, "kind": kind.ref.kind, "cluster": action.cluster},
        )
        return None

    async def _create(
        self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None, action: CreateMirror
    ) -> Stopped | None:
        worker = self.pool.get(action.cluster)
        if worker is None:
            return Retry(f"worker cluster {action.cluster} went away")
        namespace_ensured = not self.create_namespaces
        if (
            stale := self.namespaces.made_for_another(worker, action.cluster, key.namespace)
        ) is not None:
            return stale
        if not worker.namespace_feed.open_to(self.origin, key.namespace):
            # The decision saw it open (or absent) in a cache; what the worker says now
            # decides: a namespace made meanwhile by someone else is not ours to use.
            closed = await self.namespaces.open(worker.client, action.cluster, key.namespace)
            if closed is not None:
                return closed
            namespace_ensured = True
        while True:
            # Its pods and their logs are read with the copies' grant, which a least-privilege
            # credential has only where bound: bound first, readable from the pod's start.
            await self.grants.ensure(
                worker.client, key.namespace, worker.namespace_feed.username,
                everywhere=worker.dependency_feed.everywhere,
            )  # fmt: skip
            self.memory.create_started(action.cluster, key)
            try:
                created = await worker.client.create(kind.ref, action.body)
                break
            except ApiError as error:
                if error.is_already_exists:
                    return Collided(action.cluster)
                if not (error.is_not_found and not namespace_ensured):
                    return self._rejected(action, key, kind, error)
            finally:
                self.memory.create_ended(action.cluster, key)
            # NotFound on a create means the namespace is missing there: create it, once.
            closed = await self.namespaces.open(worker.client, action.cluster, key.namespace)
            if closed is not None:
                return closed
            namespace_ensured = True
        self.memory.created.expect((action.cluster, key, action.origin_uid))
        if self.observer is not None:
            self.observer.mirror_created(key, action.cluster)
        _log.debug(
            "created mirror of %s on %s",
            key.key,
            action.cluster,
            extra={"job": key.key, "kind": kind.ref.kind, "cluster": action.cluster},
        )
        # The create's own answer, not a cache, names the one mirror followed; its record
        # on the object is written later, off the dispatch path (steps/mirror_record.py).
        # Should it never be (a restart), the next decision adopts the mirror of this run
        # on this worker, once (mirror_standing.py).
        uid = Meta(created).uid
        if uid:
            version = str(Meta(created).resource_version)
            self.memory.mirror_created(action.cluster, key, action.run, uid, version)
        return None

    async def _copy_dependencies(self, action: CopyDependencies) -> Stopped | None:
        """Copy what the workload's pods need into its namespace there: the namespace is
        made or checked first, as for its mirror (whose create follows)."""
        worker = self.pool.get(action.cluster)
        if worker is None:
            return Retry(f"worker cluster {action.cluster} went away")
        if (
            stale := self.namespaces.made_for_another(worker, action.cluster, action.namespace)
        ) is not None:
            return stale
        if not worker.namespace_feed.open_to(self.origin, action.namespace):
            closed = await self.namespaces.open(worker.client, action.cluster, action.namespace)
            if closed is not None:
                return closed
        await self.grants.ensure(
            worker.client, action.namespace, worker.namespace_feed.username,
            everywhere=worker.dependency_feed.everywhere,
        )  # fmt: skip
        worker.dependency_feed.granted(action.namespace)
        return await self.copier.copy(worker.client, action)

    def _rejected(
        self, action: CreateMirror, key: WorkloadKey, kind: WorkloadKind, error: ApiError
    ) -> Terminal:
        if error.is_not_found and not self.create_namespaces:
            answer = RefusalAnswer.NO_NAMESPACE
        elif error.is_not_found:
            answer = RefusalAnswer.NOT_SERVED  # its namespace is there (just ensured)
        elif error.is_unreachable:
            answer = RefusalAnswer.UNREACHABLE
        else:
            answer = RefusalAnswer.REFUSED
        facts = {
            "cluster": action.cluster,
            "namespace": key.namespace,
            "kind": kind.ref.kind,
            "api_version": kind.ref.api_version,
            "refusal": refusals.refusal_for_tenants(error),
        }
        return action.if_refused.terminal(
            answer, facts, retry_after=self.rejected_retry, answered=error.message
        )

    async def _patch_mirror(self, kind: WorkloadKind, action: PatchMirror) -> Stopped | None:
        worker = self.pool.get(action.cluster)
        if worker is None:
            return Retry(f"worker cluster {action.cluster} went away")
        try:
            await worker.client.patch(
                kind.ref, action.name, action.patch, namespace=action.namespace
            )
        except ApiError as error:
            if error.is_conflict or error.is_not_found:
                return Retry("the mirror changed while it was being updated")
            if error.is_invalid or error.code in (400, 403, 422):
                facts = {
                    "cluster": action.cluster,
                    "namespace": action.namespace,
                    "kind": kind.ref.kind,
                    "refusal": refusals.refusal_for_tenants(error),
                }
                return action.if_refused.terminal(
                    RefusalAnswer.REFUSED,
                    facts,
                    retry_after=self.rejected_retry,
                    answered=error.message,
                )
            raise
        return None

    async def _delete_mirror(
        self, kind: WorkloadKind, action: DeleteMirror, extra: dict[str, Any]
    ) -> None:
        worker = self.pool.get(action.cluster)
        if worker is None or self.memory.deleted.pending(action.uid):
            return  # gone with its worker, or deleted by an earlier pass the cache has not shown
        # Expected before it is sent: its watch event may come before its answer, and is
        # then still known as this delete's (change_routing.py's is_mirror_echo).
        self.memory.deleted.expect(action.uid)
        try:
            await worker.client.delete(
                kind.ref,
                action.name,
                namespace=action.namespace,
                uid=action.uid,
                propagation_policy="Foreground" if action.wait_for_pods else "Background",
            )
        except ApiError as error:
            if not (error.is_not_found or error.is_conflict):
                self.memory.deleted.observed(action.uid)  # not deleted: the next pass tries
                raise
            # Already gone, or already replaced by another object.
        except BaseException:
            self.memory.deleted.observed(action.uid)
            raise
        _log.debug(
            "deleted mirror %s/%s on %s: %s",
            action.namespace,
            action.name,
            action.cluster,
            action.why,
            extra={**extra, "cluster": action.cluster},
        )

    async def _annotate(self, key: WorkloadKey, kind: WorkloadKind, action: Annotate) -> None:
        # No compare-and-swap: these annotations are jobrelay's alone, and what they say
        # is rewritten whenever it changes.
        # Its echo is looked at: the decisions that annotate end there, and go on from the
        # look it brings (a mirror recorded, a preemption marked).
        try:
            await self.manager.patch(
                kind.ref,
                key.name,
                {"metadata": {"annotations": action.annotations}},
                namespace=key.namespace,
            )
        except ApiError as error:
            if not error.is_not_found:
                raise

    async def _write_status(
        self, key: WorkloadKey, kind: WorkloadKind, action: WriteStatus, *, echo_skippable: bool
    ) -> Stopped | None:
        # A merge patch of the status subresource, not a PUT: a PUT of /status
        # replaces labels and annotations too. The resourceVersion makes it a
        # compare-and-swap against the status the decision computed from.
        patch = {"metadata": {"resourceVersion": action.resource_version}, "status": action.patch}
        try:
            with self.memory.own_writes.writing(key, echo_skippable=echo_skippable) as write:
                written = await self.manager.patch(
                    kind.ref,
                    key.name,
                    patch,
                    namespace=key.namespace,
                    subresource="status",
                )
                write.answered(Meta(written).resource_version)
        except ApiError as error:
            if error.is_conflict or error.is_not_found:
                return Retry("the object changed while its status was being written")
            if error.is_invalid:
                facts = {
                    "namespace": key.namespace,
                    "kind": kind.ref.kind,
                    "refusal": error.message,
                }
                return action.if_refused.terminal(
                    RefusalAnswer.REFUSED,
                    facts,
                    retry_after=self.rejected_retry,
                    answered=error.message,
                )
            raise
        return None
