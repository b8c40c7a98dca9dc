"""The aggregated API's request handler: trust the front proxy, authorise, then read.

Each request comes through the manager's apiserver, which authenticated the
user: it is trusted only with the front proxy's client certificate and the user
its headers name (``trust_rules.identify``), then authorised on the management
cluster with a SubjectAccessReview of that user, and only then served from the
worker the workload is placed on, with the controller's credentials there.
Worker credentials and addresses never appear in an answer. Discovery
(``/apis``, the group, the version) needs only the front proxy.

The handler needs little of the controller: the kinds it dispatches with their
management caches (:class:`DispatchedKind`) and its workers by name
(:class:`Workers`); the controller's runner hands it both.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.finished_mirrors import FinishedMirrorTtl
from jobrelay.kinds.mirror_pods import mirror_pod_uids, pods_of_mirror
from jobrelay.kinds.pod_ownership import OwnerHop
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS, SUBJECT_ACCESS_REVIEWS
from jobrelay.kube.watching import InformerEvent
from jobrelay.relayapi import finished_logs_rules, panel_rules, route_rules, trust_rules
from jobrelay.relayapi.access_reviews import AccessReviews
from jobrelay.relayapi.httpserver import Answer, HttpRequest, Stream
from jobrelay.relayapi.log_source_rules import LogSource, log_sources
from jobrelay.relayapi.logstreams import (
    PodWatch,
    bounded_follow,
    capped,
    chained,
    merged,
    pod_log,
    prefixed,
    watched,
)
from jobrelay.relayapi.managedby_webhook_rules import (
    WEBHOOK_PATH,
    ManagedByDefault,
    admission_answer,
)
from jobrelay.relayapi.panel import PanelFeed
from jobrelay.relayapi.panel_routes import PanelRoutes, Refusal
from jobrelay.relayapi.pending_routes import PendingRoutes
from jobrelay.relayapi.pending_rules import PendingPlan, match_pending_route
from jobrelay.relayapi.stream_rules import StreamBudget
from jobrelay.vocabulary.meta import Meta

__all__ = [
    "DispatchedKind", "ObjectCache", "Placed", "QueueReads", "RelayApi", "WorkerLink", "Workers",
]  # fmt: skip

_log = logging.getLogger(__name__)

# The controller's default keeping of finished mirrors (the runner passes its own).
_AN_HOUR = FinishedMirrorTtl(3600.0)


class ObjectCache(Protocol):
    """A kind's management objects by ``namespace/name`` (the runner's informer)."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def items(self) -> list[tuple[str, dict[str, Any]]]: ...

    def add_handler(self, handler: Callable[[InformerEvent], None]) -> None: ...


class DispatchedKind(Protocol):
    """A kind the controller dispatches, with its management cache (the runner's KindRuntime)."""

    @property
    def kind(self) -> WorkloadKind: ...

    @property
    def objects(self) -> ObjectCache: ...


class WorkerLink(Protocol):
    """One worker as the handler reads it: connected or not, its mirrors, and the client
    of users' streams (a pool of its own, apart from the probe's and the informers')."""

    @property
    def name(self) -> str: ...

    @property
    def connected(self) -> bool: ...

    @property
    def streams(self) -> ApiClient: ...

    def mirror(self, key: tuple[str, str]) -> dict[str, Any] | None: ...


class Workers(Protocol):
    """The controller's workers by name (its WorkerPool)."""

    def get(self, name: str) -> WorkerLink | None: ...

    def workers(self) -> Sequence[WorkerLink]: ...

    def registrations(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Placed:
    """A workload's current mirror, its worker and the mirror's pods there."""

    worker: WorkerLink
    mirror: dict[str, Any]
    pods: list[Mapping[str, Any]]
    # The label selector each pod was listed by (its kind's: by the mirror's UID where
    # its pods carry it), by pod name: a follow watches its pods by the same.
    selectors: Mapping[str, str]


class QueueReads(Protocol):
    """What the API reads of the controller's queue admission (``QueueAdmission``)."""

    def queue_of(self, namespace: str, named: str) -> str: ...

    @property
    def memory(self) -> _LastPlan: ...


class _LastPlan(Protocol):
    @property
    def last(self) -> PendingPlan | None: ...


class Refused(Exception):
    """A request the handler turns down: answered as a Kubernetes ``Status``."""

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.answer = Answer(code, route_rules.status_body(code, message, reason))


class RelayApi:
    """The request handler: authenticate, authorise, then read from the worker."""

    def __init__(
        self,
        manager: ApiClient,
        pool: Workers,
        kinds: Mapping[str, DispatchedKind],
        limits: route_rules.Limits,
        *,
        controller_name: str,
        origin: str,
        front_proxy: Callable[[], trust_rules.FrontProxy | None],
        reviewer: ApiClient | None = None,
        queues: Callable[[], Iterable[Mapping[str, Any]]] = tuple,
        queue_of: Callable[[str, str], str] = lambda _namespace, named: named,
        unrecorded: Callable[[str, str, str], tuple[int, str] | None] = (
            lambda _kind, _key, _worker: None
        ),
        finished_mirrors: FinishedMirrorTtl = _AN_HOUR,
        defaults: Sequence[ManagedByDefault] = (),
        admission: QueueReads | None = None,
    ) -> None:
        if admission is not None:  # its last plan: the positions a tenant reads
            queue_of = admission.queue_of
        self._manager = manager
        # Each kind's managedBy default, which the admission webhook adds.
        self._defaults = tuple(defaults)
        self._front_proxy = front_proxy
        self._pool = pool
        self._kinds = kinds
        self._controller_name = controller_name
        self._origin = origin
        # (kind, namespace/name, worker) -> the (run, UID) of the mirror the relay created
        # there and has not recorded yet: the API follows what the relay follows.
        self._unrecorded = unrecorded
        # How long the relay keeps a finished mirror: what to tell once it is gone.
        self._finished_mirrors = finished_mirrors
        self.limits = limits
        self.streams = StreamBudget(
            per_user=limits.max_streams_per_user,
            per_worker=limits.max_streams_per_worker,
            overall=limits.max_streams,
        )
        # Reviews go through a client of their own (the runner's ``reviewer``): a flood of
        # them never queues the informers' and the status writes' requests.
        reviews_by = reviewer if reviewer is not None else manager
        self.reviews = AccessReviews(lambda body: reviews_by.review(SUBJECT_ACCESS_REVIEWS, body))
        # The panel's views, built from the caches the controller already keeps.
        self.panel = PanelFeed(kinds, pool.registrations, queues, queue_of=queue_of,
                               max_watches=limits.max_watches,
                               max_watches_per_user=limits.max_watches_per_user)  # fmt: skip
        self._panel = PanelRoutes(
            self.panel,
            manager,
            self._review,
            self._groups,
            self._object,
            self._placed_by,
            known=self.reviews.known,
        )
        self._pending = PendingRoutes(self._review, lambda: {
            r.kind.ref.kind: (r.kind.ref.plural, r.kind.ref.group) for r in kinds.values()
        }, lambda: admission.memory.last if admission is not None else None, queues)  # fmt: skip

    async def handle(self, request: HttpRequest) -> Answer | Stream:
        if request.path == WEBHOOK_PATH:
            # The manager's apiserver calls it with no front-proxy certificate (none is
            # configured for webhooks): it answers a patch of the object it is sent and
            # reads nothing, so anyone may ask.
            if request.method != "POST":
                return Answer(405, route_rules.status_body(405, "only POST"))
            return Answer(*admission_answer(request.body, self._defaults))
        try:
            user = self._authenticate(request)
            if request.method != "GET":
                raise Refused(405, "only GET")
            document = route_rules.discovery(request.path, self._plurals())
            if document is not None:
                return Answer(200, json.dumps(document).encode())
            panel_route = panel_rules.match_panel_route(request.path)
            pending_in = match_pending_route(request.path)
            if panel_route is not None or pending_in is not None:
                try:
                    if pending_in is not None:
                        return await self._pending.serve(user, pending_in)
                    assert panel_route is not None
                    return await self._panel.serve(user, panel_route, request.params)
                except Refusal as refusal:
                    raise Refused(refusal.code, refusal.message, refusal.reason) from None
            route = route_rules.match_route(request.path)
            if route is None:
                raise Refused(
                    404,
                    f"no such route: try {route_rules.API_PATH}/namespaces/NS/jobs/NAME/log "
                    "or .../mirror",
                )
            if route.what == route_rules.LOG:
                return await self._logs(user, route, request.params)
            return await self._mirror(user, route)
        except Refused as refused:
            return refused.answer
        except route_rules.BadRequest as error:
            return Answer(400, route_rules.status_body(400, str(error)))

    # -- who and whether ----------------------------------------------------------

    def _authenticate(self, request: HttpRequest) -> route_rules.User:
        found = trust_rules.identify(
            self._front_proxy(), request.certificate_cn, request.header_lines
        )
        if isinstance(found, str):
            raise Refused(401, found)
        return found

    async def _review(self, user: route_rules.User, **attributes: str) -> bool:
        """Whether the manager lets ``user`` do this (access_reviews.py: the one cache)."""
        try:
            return await self.reviews.allowed(user, **attributes)
        except ApiError as error:
            _log.warning("SubjectAccessReview failed: %s %s", error.reason, error.message)
            raise Refused(503, "cannot check permissions now; try again") from None

    async def _authorise(self, user: route_rules.User, what: str, **attributes: str) -> None:
        if not await self._review(user, **attributes):
            raise Refused(
                403,
                f'user "{user.name}" cannot get {what} in namespace '
                f'"{attributes["namespace"]}" on the management cluster',
            )

    # -- where ---------------------------------------------------------------------

    def _plurals(self) -> list[tuple[str, str]]:
        return [(r.kind.ref.plural, r.kind.ref.kind) for r in self._kinds.values()]

    def _groups(self) -> dict[str, str]:
        """Each dispatched kind's plural and its API group."""
        return {r.kind.ref.plural: r.kind.ref.group for r in self._kinds.values()}

    def _object(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._runtime(plural).objects.get(f"{namespace}/{name}")

    async def _placed_by(
        self, plural: str, namespace: str, name: str
    ) -> tuple[str, ApiClient, dict[str, Any], list[Mapping[str, Any]]]:
        """The panel's view of :meth:`_placed` (its refusals as the panel's)."""
        try:
            placed = await self._placed(
                self._runtime(plural), route_rules.Route("mirror", namespace, plural, name)
            )
        except Refused as refused:
            raise Refusal(refused.code, str(refused)) from None
        return placed.worker.name, placed.worker.streams, placed.mirror, placed.pods

    def _runtime(self, plural: str) -> DispatchedKind:
        for runtime in self._kinds.values():
            if runtime.kind.ref.plural == plural:
                return runtime
        known = ", ".join(sorted({r.kind.ref.plural for r in self._kinds.values()}))
        raise Refused(
            404, f"{plural!r} is not a kind this controller dispatches (it has: {known})",
            "NotFound",
        )  # fmt: skip

    async def _placed(self, runtime: DispatchedKind, route: route_rules.Route) -> Placed:
        """The workload's mirror as the relay follows it (its UID recorded on the object),
        and its pods (those its kind's adapter says are the mirror's, by UID); 404 when
        there is none."""
        kind = runtime.kind
        key = f"{route.namespace}/{route.name}"
        obj = runtime.objects.get(key)
        if obj is None:
            raise Refused(
                404, f'{kind.ref.kind} "{route.name}" managed by jobrelay not found', "NotFound"
            )
        workers = {worker.name: worker for worker in self._pool.workers()}
        found = route_rules.current_mirror(
            obj,
            ((name, worker.mirror((kind.name, key))) for name, worker in workers.items()),
            controller_name=self._controller_name,
            origin=self._origin,
            created=lambda worker: self._unrecorded(kind.name, key, worker),
        )
        if found is None:
            now = datetime.datetime.now(datetime.UTC)
            gone = finished_logs_rules.pods_removed(kind, obj, self._finished_mirrors, now=now)
            if gone is not None:  # finished: it waits for no worker, its pods went
                raise Refused(404, gone, finished_logs_rules.PODS_REMOVED)
            raise Refused(
                404, f'{kind.ref.kind} "{route.name}" has no mirror on a worker now', "NotPlaced"
            )
        cluster, mirror = found
        worker = workers[cluster]
        if not worker.connected:
            raise Refused(503, f'worker "{cluster}" is not connected now', "WorkerUnavailable")
        try:
            hops = [
                (hop, await self._hop(worker, route.namespace, hop))
                for hop in kind.owner_hops(mirror)
            ]
            uids = mirror_pod_uids(kind, mirror, hops)
            selectors: dict[str, str] = {}
            pods: list[Mapping[str, Any]] = []
            for selector in kind.pod_selectors(mirror):
                listed = await worker.streams.list(
                    PODS, namespace=route.namespace, label_selector=selector
                )
                for pod in pods_of_mirror(kind, uids, listed.items):
                    if selectors.setdefault(Meta(pod).name, selector) == selector:
                        pods.append(pod)
        except ApiError as error:
            _log.warning("listing pods on %s failed: %s %s", cluster, error.reason, error.message)
            raise Refused(
                502, f'worker "{cluster}" did not list the pods ({error.reason})'
            ) from None
        return Placed(worker, mirror, pods, selectors)

    async def _hop(
        self, worker: WorkerLink, namespace: str, hop: OwnerHop
    ) -> dict[str, Any] | None:
        """An object the mirror's operator made, as its worker has it (None: not there, or
        not readable with our credentials there: its pods are then not shown)."""
        try:
            return await worker.streams.get(hop.ref, hop.name, namespace=namespace)
        except ApiError as error:
            if not (error.is_not_found or error.code == 403):
                raise
            if error.code == 403:
                _log.info(
                    "cannot read %s %s/%s on %s: %s", hop.ref.kind, namespace, hop.name,
                    worker.name, error.message,
                )  # fmt: skip
            return None

    # -- routes ----------------------------------------------------------------------

    async def _mirror(self, user: route_rules.User, route: route_rules.Route) -> Answer:
        runtime = self._runtime(route.plural)
        ref = runtime.kind.ref
        await self._authorise(
            user, ref.plural, namespace=route.namespace, resource=ref.plural, group=ref.group,
            name=route.name,
        )  # fmt: skip
        placed = await self._placed(runtime, route)
        body = {
            "cluster": placed.worker.name,
            "mirror": placed.mirror,
            "pods": [route_rules.pod_summary(pod) for pod in sorted(placed.pods, key=_created)],
        }
        return Answer(200, json.dumps(body).encode())

    async def _logs(
        self, user: route_rules.User, route: route_rules.Route, params: Mapping[str, str]
    ) -> Answer | Stream:
        query = route_rules.parse_log_query(params)
        runtime = self._runtime(route.plural)
        await self._authorise(
            user, "pods/log", namespace=route.namespace, resource="pods", subresource="log"
        )
        placed = await self._placed(runtime, route)
        cluster, client = placed.worker.name, placed.worker.streams
        if not placed.pods:
            gone = finished_logs_rules.no_pods_left(runtime.kind, placed.mirror)
            if gone is not None:
                raise Refused(404, gone, finished_logs_rules.PODS_REMOVED)
            raise Refused(404, f'no pods of "{route.name}" on its worker yet', "NoPods")
        chosen = route_rules.choose_pods(
            placed.pods, index=query.index, all_pods=query.all_pods, index_of=runtime.kind.pod_index
        )
        if not chosen:
            raise Refused(
                404, f'no pod of "{route.name}" has completion index {query.index}', "NoPods"
            )
        names = [Meta(pod).name for pod in chosen]
        sources = log_sources(chosen, query)
        watches = {placed.selectors[name] for name in names}
        # Pod streams held open at once: a follow reads every chosen pod at once (and
        # holds a watch of them per selector, on its worker's pool too); a plain read one
        # pod after another.
        streams = len(sources) + len(watches) if query.follow else 1
        claim = self.streams.claim(user.name, cluster, streams)
        if isinstance(claim, str):
            raise Refused(429, claim, "TooManyRequests")
        try:
            chunks = self._log_chunks(
                client, route.namespace, {name: placed.selectors[name] for name in names}, query,
                sources,
            )  # fmt: skip
        except BaseException:
            self.streams.release(claim)
            raise
        _log.info(
            "logs of %s/%s (%s) from %s for %s",
            route.namespace, route.name, ", ".join(names), cluster, user.name,
            extra={"event": "logs", "user": user.name},
        )  # fmt: skip
        # Which pods it reads (names only), for a client that wants to say so.
        headers = [(route_rules.POD_HEADER, ",".join(names))]
        return Stream(chunks, done=lambda: self.streams.release(claim), headers=headers)

    def _log_chunks(
        self,
        client: ApiClient,
        namespace: str,
        selectors: Mapping[str, str],
        query: route_rules.LogQuery,
        sources: Sequence[LogSource],
    ) -> AsyncIterator[bytes]:
        """The chunks of ``sources``, of the pods ``selectors`` names (each pod's by the
        selector it was listed by, which a follow watches it by)."""
        params = route_rules.kubelet_params(query)
        idle = self.limits.follow_idle_timeout
        names = list(selectors)
        watches = {
            selector: PodWatch(client, namespace, selector, [n for n in names if selectors[n] == selector])
            for selector in dict.fromkeys(selectors.values())
        } if query.follow else {}  # fmt: skip

        def one(source: LogSource) -> AsyncIterator[bytes]:
            name = source.pod
            watch = watches.get(selectors[name])
            ended = functools.partial(watch.ended, name) if watch is not None else None
            asked = {**params, "container": source.container} if source.container else params
            chunks = pod_log(client, namespace, name, asked, idle, ended)
            if query.follow:
                chunks = bounded_follow(
                    chunks, self.limits.max_follow_bytes, self.limits.follow_rate
                )
            if source.prefix:
                chunks = prefixed(source.prefix, chunks)
            return chunks

        streams = [one(source) for source in sources]
        if watches:
            chunks = merged(streams) if len(streams) > 1 else streams[0]
            for watch in watches.values():
                chunks = watched(watch, chunks)
            return chunks
        limit = min(self.limits.max_bytes, query.limit_bytes or self.limits.max_bytes)
        return capped(chained(streams), limit)


def _created(pod: Mapping[str, Any]) -> str:
    return Meta(pod).creation_timestamp
