"""The controller's read-only HTTPS API: remote logs and the mirror view, for manager users.

Each request is authenticated and authorised on the management cluster with
the caller's own identity (a verified client certificate, or a TokenReview of
its bearer token; then a SubjectAccessReview), and only then served from the
worker the workload is placed on, with the controller's credentials there.
Worker credentials and addresses never appear in an answer.

The controller publishes where the API is and how to trust it in the ConfigMap
``<--namespace>/jobrelay-api`` (keys ``address`` and ``ca.crt``), readable by
every authenticated user (deploy/rbac.yaml); only the leader writes it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jobrelay.controller.options import ApiSettings
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS, PODS, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, FIELD_MANAGER
from jobrelay.web import relayapi as rules
from jobrelay.web.apiserver import Answer, ApiServer, Request, Stream
from jobrelay.web.tls import self_signed, server_context

__all__ = [
    "API_CONFIGMAP",
    "RelayApi",
    "limits_of",
    "published_configmap",
    "start_api",
]

_log = logging.getLogger(__name__)

API_CONFIGMAP = "jobrelay-api"
POD_HEADER = "jobrelay-pods"
_AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
# Bytes read from a worker's log stream at once are small; lines cut by the byte cap end
# with this marker so that a reader knows the log goes on.
_TRUNCATED = b"\n[jobrelay: output cut at the byte limit; use --tail or --since]\n"


def limits_of(settings: ApiSettings) -> rules.Limits:
    return rules.Limits(
        max_streams_per_user=settings.max_streams_per_user,
        max_bytes=settings.max_bytes,
        follow_idle_timeout=settings.follow_idle_timeout,
    )


class Refused(Exception):
    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.answer = Answer(code, rules.status_body(code, message, reason))


class RelayApi:
    """The request handler: authenticate, authorise, then read from the worker."""

    def __init__(
        self,
        manager: ApiClient,
        pool: WorkerPool,
        kinds: Mapping[str, KindRuntime],
        limits: rules.Limits,
    ) -> None:
        self._manager = manager
        self._pool = pool
        self._kinds = kinds
        self.limits = limits
        self.slots = rules.StreamSlots(limits.max_streams_per_user)

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

    def _runtime(self, kind: str) -> KindRuntime:
        for runtime in self._kinds.values():
            ref = runtime.kind.ref
            if kind in (ref.kind, ref.name, ref.plural, ref.kind.lower()):
                return runtime
        known = ", ".join(r.kind.ref.kind for r in self._kinds.values())
        raise Refused(400, f"kind {kind!r} is not dispatched by this controller (it has: {known})")

    async def _placed_pods(
        self, runtime: KindRuntime, route: rules.Route
    ) -> tuple[str, ApiClient, list[dict[str, Any]]]:
        """The worker's name, its client and the mirror's pods there (404 when none)."""
        kind = runtime.kind.ref.kind
        obj = runtime.objects.get(f"{route.namespace}/{route.name}")
        if obj is None:
            raise Refused(404, f'{kind} "{route.name}" managed by jobrelay not found', "NotFound")
        cluster = ((obj.get("metadata") or {}).get("annotations") or {}).get(CLUSTER_ANNOTATION)
        if not cluster:
            raise Refused(404, f'{kind} "{route.name}" is not placed on a worker yet', "NotPlaced")
        worker = self._pool.get(str(cluster))
        if worker is None or not worker.connected:
            raise Refused(503, f'worker "{cluster}" is not connected now', "WorkerUnavailable")
        try:
            pods = await worker.client.list(
                PODS,
                namespace=route.namespace,
                label_selector=rules.pod_selector(kind, route.name),
            )
        except ApiError as error:
            _log.warning("listing pods on %s failed: %s %s", cluster, error.reason, error.message)
            raise Refused(
                502, f'worker "{cluster}" did not list the pods ({error.reason})'
            ) from None
        return str(cluster), worker.client, list(pods.items)

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
        cluster, _, pods = await self._placed_pods(runtime, route)
        worker = self._pool.get(cluster)
        mirror = (
            worker.mirror((runtime.kind.name, f"{route.namespace}/{route.name}"))
            if worker
            else None
        )
        body = {
            "cluster": cluster,
            "mirror": mirror,
            "pods": [rules.pod_summary(pod) for pod in sorted(pods, key=_created)],
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
        cluster, client, pods = await self._placed_pods(runtime, route)
        if not pods:
            raise Refused(404, f'no pods of "{route.name}" on its worker yet', "NoPods")
        chosen = rules.choose_pods(pods, index=query.index, all_pods=query.all_pods)
        if not chosen:
            raise Refused(
                404, f'no pod of "{route.name}" has completion index {query.index}', "NoPods"
            )
        if not self.slots.acquire(user.name):
            raise Refused(
                429, f"at most {self.slots.limit} log streams per user at once", "TooManyRequests"
            )
        names = [str((pod.get("metadata") or {}).get("name")) for pod in chosen]
        params_out = rules.kubelet_params(query)
        idle = self.limits.follow_idle_timeout
        if query.all_pods:
            sources = [
                _prefixed(
                    f"[pod/{name}] ".encode(),
                    _pod_log(client, route.namespace, name, params_out, idle),
                )
                for name in names
            ]
            chunks = _merged(sources) if query.follow else _chained(sources)
        else:
            chunks = _pod_log(client, route.namespace, names[0], params_out, idle)
        if not query.follow:
            chunks = _capped(chunks, self.limits.max_bytes)
        _log.info(
            "logs of %s/%s (%s) from %s for %s",
            route.namespace, route.name, ", ".join(names), cluster, user.name,
            extra={"event": "logs", "user": user.name},
        )  # fmt: skip
        # Which pods it reads (names only), for a client that wants to say so.
        headers = [(POD_HEADER, ",".join(names))]
        return Stream(chunks, done=lambda: self.slots.release(user.name), headers=headers)


def _created(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or "")


async def _pod_log(
    client: ApiClient, namespace: str, pod: str, params: Mapping[str, str], idle: float
) -> AsyncIterator[bytes]:
    """One pod's log; a refusal or a broken stream ends it with one line saying why."""
    try:
        async with client.pod_log(namespace, pod, params, follow_idle_timeout=idle) as chunks:
            if params.get("follow") == "true":
                chunks = _until_ended(chunks, _pod_ended(client, namespace, pod))
            async for chunk in chunks:
                yield chunk
    except ApiError as error:
        if error.reason == "Timeout" and params.get("follow") == "true":
            yield f"\n[jobrelay: no output for {idle:g} s; stopped following]\n".encode()
            return
        # The worker's own words only when they are about the request, never addresses.
        message = rules.scrub(error.message) if error.code in (400, 404) else error.reason
        yield f"[jobrelay: pod {pod}: {message}]\n".encode()


_TERMINAL_PHASES = frozenset(("Succeeded", "Failed"))
# After its pod has ended, a follow still passes on what comes within this many seconds. A
# kubelet ends the stream itself when the container exits; a simulated one (KWOK) never does.
FOLLOW_GRACE = 1.0


async def _pod_ended(client: ApiClient, namespace: str, pod: str) -> None:
    """Returns once the pod has ended (Succeeded, Failed, or deleted), watching it."""
    selector = f"metadata.name={pod}"
    while True:
        try:
            listed = await client.list(PODS, namespace=namespace, field_selector=selector)
            if (
                not listed.items
                or listed.items[0].get("status", {}).get("phase") in _TERMINAL_PHASES
            ):
                return
            async with client.watch(
                PODS, namespace=namespace, field_selector=selector,
                resource_version=listed.resource_version, timeout_seconds=300,
            ) as events:  # fmt: skip
                async for event in events:
                    phase = (event.object.get("status") or {}).get("phase")
                    if event.type == "DELETED" or phase in _TERMINAL_PHASES:
                        return
        except ApiError as error:
            _log.debug("watching pod %s/%s: %s", namespace, pod, error)
            await asyncio.sleep(1.0)  # back off, then look again


async def _until_ended(
    chunks: AsyncIterator[bytes], ended: Awaitable[None], grace: float = FOLLOW_GRACE
) -> AsyncIterator[bytes]:
    """``chunks`` until they end, or until ``grace`` seconds after ``ended`` returned."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

    async def pump() -> None:
        try:
            async for chunk in chunks:
                await queue.put(chunk)
        finally:
            await queue.put(None)

    pumping = asyncio.create_task(pump())
    ending: asyncio.Future[None] = asyncio.ensure_future(ended)
    deadline: float | None = None
    getting: asyncio.Task[bytes | None] | None = None
    try:
        while True:
            getting = getting or asyncio.create_task(queue.get())
            waiting: set[asyncio.Future[Any]] = {getting} if deadline else {getting, ending}
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when="FIRST_COMPLETED")
            if getting in done:
                chunk, getting = getting.result(), None
                if chunk is None:
                    await asyncio.wait({pumping})
                    if (error := pumping.exception()) is not None:
                        raise error  # e.g. the idle time-out: the caller says so
                    return
                yield chunk
            elif deadline is None and ending in done:
                deadline = loop.time() + grace
            elif deadline is not None:
                return
    finally:
        for task in (pumping, ending, getting):
            if task is not None:
                task.cancel()
        await asyncio.gather(pumping, ending, return_exceptions=True)


async def _prefixed(prefix: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Each line of ``chunks`` with ``prefix`` before it (kubectl --prefix)."""
    pending = b""
    async for chunk in chunks:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if lines:
            yield b"".join(prefix + line + b"\n" for line in lines)
    if pending:
        yield prefix + pending + b"\n"


async def _chained(sources: Sequence[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    for source in sources:
        async for chunk in source:
            yield chunk


async def _merged(sources: Sequence[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    """Every source's chunks as they come (follows of several pods at once)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

    async def pump(source: AsyncIterator[bytes]) -> None:
        try:
            async for chunk in source:
                await queue.put(chunk)
        finally:
            await queue.put(None)

    tasks = [asyncio.create_task(pump(source)) for source in sources]
    try:
        remaining = len(tasks)
        while remaining:
            chunk = await queue.get()
            if chunk is None:
                remaining -= 1
            else:
                yield chunk
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _capped(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    sent = 0
    async for chunk in chunks:
        if sent + len(chunk) > limit:
            yield chunk[: limit - sent] + _TRUNCATED
            return
        sent += len(chunk)
        yield chunk


# -- serving and publishing ----------------------------------------------------------


async def client_ca(manager: ApiClient) -> str | None:
    """The manager's client CA (``client-ca-file`` of extension-apiserver-authentication),
    against which callers' client certificates are verified; None when it cannot be read."""
    namespace, name = _AUTH_CONFIGMAP
    try:
        configmap = await manager.get(CONFIGMAPS, name, namespace=namespace)
    except ApiError as error:
        _log.warning(
            "cannot read %s/%s (%s): the API accepts bearer tokens only",
            namespace, name, error.reason,
        )  # fmt: skip
        return None
    ca = (configmap.get("data") or {}).get("client-ca-file")
    return str(ca) if ca else None


def _url_for(bound: Sequence[tuple[str, int]], settings: ApiSettings) -> str:
    if settings.url:
        return settings.url.rstrip("/")
    host, port = bound[0][0], bound[0][1]
    if host in ("0.0.0.0", "::"):
        host = _own_address()
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def _own_address() -> str:
    """This host's address as others reach it (a pod's IP), else its name."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return socket.gethostname()


def _hosts(settings: ApiSettings) -> list[str]:
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname(), _own_address()]
    if settings.url and (host := urlsplit(settings.url).hostname):
        hosts.append(host)
    bound_host = settings.address.rpartition(":")[0].strip("[]")
    if bound_host and bound_host not in ("0.0.0.0", "::"):
        hosts.append(bound_host)
    return hosts


async def start_api(
    manager: ApiClient, handler: RelayApi, settings: ApiSettings
) -> tuple[ApiServer, str, str]:
    """Serve the API: the server, its published URL and the CA (PEM) clients trust."""
    if settings.cert_file or settings.key_file:
        if not (settings.cert_file and settings.key_file):
            raise ValueError("--api-cert-file and --api-key-file go together")
        cert_pem = await asyncio.to_thread(Path(settings.cert_file).read_bytes)
        key_pem = await asyncio.to_thread(Path(settings.key_file).read_bytes)
    else:
        cert_pem, key_pem = self_signed(_hosts(settings))
    tls = server_context(cert_pem, key_pem, await client_ca(manager))
    server = ApiServer(settings.address, tls, handler.handle)
    bound = await server.start()
    return server, _url_for(bound, settings), cert_pem.decode()


def published_configmap(namespace: str, url: str, ca_pem: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": API_CONFIGMAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "jobrelay"},
        },
        "data": {"address": url, "ca.crt": ca_pem},
    }


async def publish(manager: ApiClient, namespace: str, url: str, ca_pem: str) -> None:
    """Write the ConfigMap (the leader's job), retrying until it is written or cancelled."""
    delay = 1.0
    while True:
        try:
            await manager.patch(
                CONFIGMAPS, API_CONFIGMAP, published_configmap(namespace, url, ca_pem),
                namespace=namespace, patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER,
                force=True,
            )  # fmt: skip
        except ApiError as error:
            _log.warning("cannot publish %s/%s: %s %s; retrying", namespace, API_CONFIGMAP,
                         error.reason, error.message)  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        _log.info(
            "published the API's address %s in ConfigMap %s/%s", url, namespace, API_CONFIGMAP,
            extra={"event": "api-published", "url": url},
        )  # fmt: skip
        return
