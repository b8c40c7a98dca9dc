"""The logs API's request handler: authenticate, authorise, then read from the worker.

Each request is authenticated and authorised on the management cluster with
the caller's own identity (a verified client certificate, or a TokenReview of
its bearer token; then a SubjectAccessReview), and only then served from the
worker the workload is placed on, with the controller's credentials there.
Worker credentials and addresses never appear in an answer.

The handler needs little of the controller: the kinds it dispatches with their
management caches (:class:`DispatchedKind`) and its workers by name
(:class:`Workers`); the controller's runner hands it both.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from jobrelay.relayapi import rules
from jobrelay.relayapi.httpserver import Answer, Request, Stream
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
from jobrelay.relayapi.stream_rules import StreamBudget
from jobrelay.vocabulary.meta import Meta

__all__ = ["DispatchedKind", "ObjectCache", "Placed", "RelayApi", "WorkerLink", "Workers"]

_log = logging.getLogger(__name__)


class ObjectCache(Protocol):
    """A kind's management objects by ``namespace/name`` (the runner's informer)."""

    def get(self, key: str) -> dict[str, Any] | None: ...


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


@dataclass(frozen=True, slots=True)
class Placed:
    """A workload's current mirror, its worker and the mirror's pods there."""

    worker: WorkerLink
    mirror: dict[str, Any]
    pods: list[Mapping[str, Any]]
    selector: str  # the label selector of its pods (by the mirror's UID)


class Refused(Exception):
    """A request the handler turns down: answered as a Kubernetes ``Status``."""

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.answer = Answer(code, rules.status_body(code, message, reason))


class RelayApi:
    """The request handler: authenticate, authorise, then read from the worker."""

    def __init__(
        self,
        manager: ApiClient,
        pool: Workers,
        kinds: Mapping[str, DispatchedKind],
        limits: rules.Limits,
        *,
        controller_name: str,
        origin: str,
    ) -> None:
        self._manager = manager
        self._pool = pool
        self._kinds = kinds
        self._controller_name = controller_name
        self._origin = origin
        self.limits = limits
        self.streams = StreamBudget(
            per_user=limits.max_streams_per_user,
            per_worker=limits.max_streams_per_worker,
            overall=limits.max_streams,
        )

    async def handle(self, request: Request) -> Answer | Stream:
        try:
            if request.method != "GET":
                raise Refused(405, "only GET")
            route = rules.match_route(request.path)
            if route is None:
                raise Refused(
                    404,
                    "no such route: try /v1/namespaces/NS/jobs/NAME/logs or .../mirror",
                )
            user = await self._authenticate(request)
            if route.what == "logs":
                return await self._logs(user, route, request.params)
            return await self._mirror(user, route, request.params)
        except Refused as refused:
            return refused.answer
        except rules.BadRequest as error:
            return Answer(400, rules.status_body(400, str(error)))

    # -- who and whether ----------------------------------------------------------

    async def _authenticate(self, request: Request) -> rules.User:
        token = request.bearer_token
        if token is not None:
            try:
                review = await self._manager.review(TOKEN_REVIEWS, rules.token_review(token))
            except ApiError as error:
                _log.warning("TokenReview failed: %s %s", error.reason, error.message)
                raise Refused(503, "cannot check credentials now; try again") from None
            user = rules.user_from_token_review(review)
            if user is None:
                raise Refused(401, "the bearer token is not valid on the management cluster")
            return user
        if request.certificate_user is not None:
            return request.certificate_user
        raise Refused(
            401, "no credentials: send a bearer token or a client certificate of the manager"
        )

    async def _authorise(self, user: rules.User, what: str, **attributes: str) -> None:
        try:
            review = await self._manager.review(
                SUBJECT_ACCESS_REVIEWS, rules.access_review(user, **attributes)
            )
        except ApiError as error:
            _log.warning("SubjectAccessReview failed: %s %s", error.reason, error.message)
            raise Refused(503, "cannot check permissions now; try again") from None
        if not rules.allowed(review):
            raise Refused(
                403,
                f'user "{user.name}" cannot get {what} in namespace '
                f'"{attributes["namespace"]}" on the management cluster',
            )

    # -- where ---------------------------------------------------------------------

    def _runtime(self, kind: str) -> DispatchedKind:
        for runtime in self._kinds.values():
            ref = runtime.kind.ref
            if kind in (ref.kind, ref.name, ref.plural, ref.kind.lower()):
                return runtime
        known = ", ".join(r.kind.ref.kind for r in self._kinds.values())
        raise Refused(400, f"kind {kind!r} is not dispatched by this controller (it has: {known})")

    async def _placed(self, runtime: DispatchedKind, route: rules.Route) -> Placed:
        """The workload's current mirror as jobrelay's own caches know it, and its pods
        (selected by the mirror's UID); 404 when there is none."""
        kind = runtime.kind.ref.kind
        key = f"{route.namespace}/{route.name}"
        obj = runtime.objects.get(key)
        if obj is None:
            raise Refused(404, f'{kind} "{route.name}" managed by jobrelay not found', "NotFound")
        workers = {worker.name: worker for worker in self._pool.workers()}
        found = rules.current_mirror(
            obj,
            ((name, worker.mirror((runtime.kind.name, key))) for name, worker in workers.items()),
            controller_name=self._controller_name,
            origin=self._origin,
        )
        if found is None:
            raise Refused(404, f'{kind} "{route.name}" has no mirror on a worker now', "NotPlaced")
        cluster, mirror = found
        worker = workers[cluster]
        if not worker.connected:
            raise Refused(503, f'worker "{cluster}" is not connected now', "WorkerUnavailable")
        mirror_uid = Meta(mirror).uid
        selector = rules.pod_selector(kind, mirror_uid)
        try:
            listed = await worker.streams.list(
                PODS, namespace=route.namespace, label_selector=selector
            )
        except ApiError as error:
            _log.warning("listing pods on %s failed: %s %s", cluster, error.reason, error.message)
            raise Refused(
                502, f'worker "{cluster}" did not list the pods ({error.reason})'
            ) from None
        pods = rules.pods_of_mirror(listed.items, kind, mirror_uid)
        return Placed(worker, mirror, pods, selector)

    # -- routes ----------------------------------------------------------------------

    async def _mirror(
        self, user: rules.User, route: rules.Route, params: Mapping[str, str]
    ) -> Answer:
        runtime = self._runtime(rules.parse_kind(params))
        ref = runtime.kind.ref
        await self._authorise(
            user, ref.plural, namespace=route.namespace, resource=ref.plural, group=ref.group,
            name=route.name,
        )  # fmt: skip
        placed = await self._placed(runtime, route)
        body = {
            "cluster": placed.worker.name,
            "mirror": placed.mirror,
            "pods": [rules.pod_summary(pod) for pod in sorted(placed.pods, key=_created)],
        }
        return Answer(200, json.dumps(body).encode())

    async def _logs(
        self, user: rules.User, route: rules.Route, params: Mapping[str, str]
    ) -> Answer | Stream:
        query = rules.parse_log_query(params)
        runtime = self._runtime(query.kind)
        await self._authorise(
            user, "pods/log", namespace=route.namespace, resource="pods", subresource="log"
        )
        placed = await self._placed(runtime, route)
        cluster, client = placed.worker.name, placed.worker.streams
        if not placed.pods:
            raise Refused(404, f'no pods of "{route.name}" on its worker yet', "NoPods")
        chosen = rules.choose_pods(placed.pods, index=query.index, all_pods=query.all_pods)
        if not chosen:
            raise Refused(
                404, f'no pod of "{route.name}" has completion index {query.index}', "NoPods"
            )
        # Pod streams held open at once: a follow reads every chosen pod at once (and
        # holds one watch, on its worker's pool too); a plain read one pod after another.
        streams = len(chosen) + 1 if query.follow else 1
        claim = self.streams.claim(user.name, cluster, streams)
        if isinstance(claim, str):
            raise Refused(429, claim, "TooManyRequests")
        names = [Meta(pod).name for pod in chosen]
        try:
            chunks = self._log_chunks(client, route.namespace, names, placed.selector, query)
        except BaseException:
            self.streams.release(claim)
            raise
        _log.info(
            "logs of %s/%s (%s) from %s for %s",
            route.namespace, route.name, ", ".join(names), cluster, user.name,
            extra={"event": "logs", "user": user.name},
        )  # fmt: skip
        # Which pods it reads (names only), for a client that wants to say so.
        headers = [(rules.POD_HEADER, ",".join(names))]
        return Stream(chunks, done=lambda: self.streams.release(claim), headers=headers)

    def _log_chunks(
        self,
        client: ApiClient,
        namespace: str,
        names: Sequence[str],
        selector: str,
        query: rules.LogQuery,
    ) -> AsyncIterator[bytes]:
        params = rules.kubelet_params(query)
        idle = self.limits.follow_idle_timeout
        watch = PodWatch(client, namespace, selector, names) if query.follow else None

        def one(name: str) -> AsyncIterator[bytes]:
            ended = functools.partial(watch.ended, name) if watch is not None else None
            chunks = pod_log(client, namespace, name, params, idle, ended)
            if query.follow:
                chunks = bounded_follow(
                    chunks, self.limits.max_follow_bytes, self.limits.follow_rate
                )
            if query.all_pods:
                chunks = prefixed(f"[pod/{name}] ".encode(), chunks)
            return chunks

        sources = [one(name) for name in names]
        if watch is not None:
            return watched(watch, merged(sources) if len(sources) > 1 else sources[0])
        return capped(chained(sources), self.limits.max_bytes)


def _created(pod: Mapping[str, Any]) -> str:
    return Meta(pod).creation_timestamp
