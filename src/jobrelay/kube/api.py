"""A thin asynchronous client for one Kubernetes apiserver, on plain JSON dicts.

Objects stay ``dict[str, Any]`` decoded straight from the response bytes with
msgspec: jobrelay copies Jobs between clusters and must never lose a field it
does not know, which typed models would do. lightkube only supplies the
connection (kubeconfig parsing, TLS, client certificates, tokens, exec
plugins); requests, errors and watches are ours.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import msgspec
import yaml
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ConfigError as _LightkubeConfigError

import jobrelay
from jobrelay.kinds.base import KindRef
from jobrelay.kube.redact import library_problem
from jobrelay.kube.transport import (
    AiohttpTransport,
    DirectSender,
    StreamedResponse,
    direct_auth_headers,
    env_proxy,
)

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "EVENTS",
    "JOBS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "SECRETS",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "WORKER_CLUSTERS",
    "ApiClient",
    "ApiError",
    "ApiOptions",
    "KubeconfigError",
    "ListResult",
    "PatchType",
    "RequestRecord",
    "Resource",
    "WatchEvent",
    "WriteFenced",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives on the apiserver: enough to build every URL for it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def of(cls, ref: KindRef, *, namespaced: bool = True) -> Resource:
        """The resource a workload kind is served as."""
        return cls(ref.group, ref.version, ref.plural, ref.kind, namespaced=namespaced)


JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
# Our own CRD: one object per worker cluster, on the management cluster.
WORKER_CLUSTERS = Resource(
    "jobrelay.dev", "v1alpha1", "workerclusters", "WorkerCluster", namespaced=False
)
# Not a resource: /version, named so that request records and counts can show it.
_VERSION = Resource("", "", "version", "Version", namespaced=False)


class PatchType(enum.StrEnum):
    """The Content-Type that selects how the apiserver interprets a PATCH body."""

    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"  # JSON is YAML, so the body is still JSON


@dataclass(frozen=True, slots=True)
class ApiOptions:
    """Connection settings of one ApiClient. Timeouts are in seconds."""

    connect_timeout: float = 5.0
    # Bounds every non-watch request (read, write and waiting for a pooled connection).
    request_timeout: float = 30.0
    # Each open watch holds one HTTP/1.1 connection, so this caps watches plus requests.
    max_connections: int = 100
    # Idle connections are kept this long: httpx's default of 5 s made a busy
    # controller redo TLS handshakes constantly (most of its CPU, under py-spy).
    # Below the apiserver's own idle timeout, so it never closes one under us.
    keepalive_expiry: float = 60.0
    http2: bool = False
    # Honour HTTP(S)_PROXY / NO_PROXY from the environment, as kubectl does.
    trust_env: bool = True
    user_agent: str = f"jobrelay/{jobrelay.__version__}"
    # Asked before every write (any method but GET); False refuses it with WriteFenced.
    # A standby, or a leader past its renew deadline, must not write (leader election).
    write_fence: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request, handed to the ``on_request`` hook (for metrics)."""

    cluster: str
    verb: str  # Kubernetes verb: get, list, watch, create, update, patch, delete
    resource: str  # plural, e.g. "jobs"
    code: int  # HTTP status; 0 when no response arrived
    seconds: float  # for watches: until the response headers, not the stream's end


class ListResult(msgspec.Struct, frozen=True):
    """All items of a (possibly paginated) list, and the resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


class WatchEvent(msgspec.Struct, frozen=True):
    """One line of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: dict[str, Any]


class KubeconfigError(ValueError):
    """A kubeconfig (file or Secret content) that cannot be turned into a client.

    Its message says what is wrong and where, never quoting the kubeconfig
    (see :mod:`jobrelay.kube.redact`); the library's exception is not chained.
    """


# What building a client from a kubeconfig may raise (ssl.SSLError is an OSError;
# msgspec's ValidationError and binascii.Error are ValueErrors).
_CONFIG_ERRORS = (_LightkubeConfigError, OSError, ValueError, KeyError, TypeError, yaml.YAMLError)
# What an exec credential plugin's run may raise: its failure, or output that is
# no ExecCredential (lightkube reads output["status"]["token"] from its JSON).
_EXEC_ERRORS = (_LightkubeConfigError, ValueError, KeyError, TypeError)


def _exec_problem(exc: BaseException) -> str:
    if isinstance(exc, _LightkubeConfigError):
        return f"exec credential plugin: {library_problem(exc)}"
    return "exec credential plugin: its output is not an ExecCredential with status.token"


class ApiError(Exception):
    """A request the apiserver refused, or that never reached it (``code == 0``).

    ``reason`` and ``message`` come from the ``Status`` body when there is one,
    so callers branch on the apiserver's own reason, as client-go does.
    """

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = details or {}

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> ApiError:
        """The error a ``Status`` object describes, e.g. the object of a watch ERROR event."""
        code = status.get("code") or 0
        reason = status.get("reason") or _REASON_FROM_CODE.get(code, "Unknown")
        # A Status from a worker may hold anything: its message is read as text.
        message = status.get("message") or ""
        return cls(
            code, reason, message if isinstance(message, str) else str(message),
            status.get("details"),
        )  # fmt: skip

    @property
    def is_not_found(self) -> bool:
        return self.reason == "NotFound"

    @property
    def is_conflict(self) -> bool:
        # AlreadyExists is a 409 too, but means something else to a caller.
        return self.reason == "Conflict"

    @property
    def is_already_exists(self) -> bool:
        return self.reason == "AlreadyExists"

    @property
    def is_gone(self) -> bool:
        # 410 comes as "Expired" (too old resourceVersion, continue token) or "Gone".
        return self.code == 410 or self.reason in ("Expired", "Gone")

    @property
    def is_invalid(self) -> bool:
        return self.reason == "Invalid"

    @property
    def is_unreachable(self) -> bool:
        """No answer from the apiserver: connection refused, TLS failure, timeout."""
        return self.code == 0 and self.reason in ("Unreachable", "Timeout")


class WriteFenced(ApiError):
    """A write this process refused to send: it does not hold the leader lease (now)."""

    def __init__(self, verb: str, resource: str) -> None:
        super().__init__(
            0,
            "NotLeader",
            f"{verb} {resource} refused: this replica does not hold the leader lease",
        )


# Like client-go's apierrors.IsXxx, callers test the reason; when a body carries
# none (e.g. a proxy answered), it is derived from the HTTP code.
_REASON_FROM_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class _Status(msgspec.Struct):
    kind: str = ""
    code: int = 0
    reason: str = ""
    message: str = ""
    details: dict[str, Any] | None = None


_status_decoder = msgspec.json.Decoder(_Status)
_watch_event_decoder = msgspec.json.Decoder(WatchEvent)
_json_encoder = msgspec.json.Encoder()


def _error_from_body(code: int, body: bytes) -> ApiError:
    fallback_reason = _REASON_FROM_CODE.get(code, "Unknown")
    try:
        status = _status_decoder.decode(body)
    except msgspec.DecodeError:
        text = body[:500].decode("utf-8", "replace").strip()
        return ApiError(code, fallback_reason, text or f"HTTP {code}")
    if status.kind != "Status":
        return ApiError(code, fallback_reason, f"HTTP {code}")
    return ApiError(
        status.code or code, status.reason or fallback_reason, status.message, status.details
    )


def _path(resource: Resource, namespace: str | None, name: str | None = None) -> str:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    if resource.namespaced and namespace:
        prefix = f"{prefix}/namespaces/{quote(namespace, safe='')}"
    elif not resource.namespaced and namespace:
        raise ValueError(f"{resource.plural} are cluster-scoped; got namespace {namespace!r}")
    elif resource.namespaced and name is not None:
        raise ValueError(f"{resource.plural} are namespaced; a namespace is required")
    path = f"{prefix}/{resource.plural}"
    return path if name is None else f"{path}/{quote(name, safe='')}"


def _namespace_of(resource: Resource, obj: Mapping[str, Any], namespace: str | None) -> str | None:
    if namespace is not None or not resource.namespaced:
        return namespace
    ns = obj.get("metadata", {}).get("namespace")
    return ns if isinstance(ns, str) else None


def _name_of(obj: Mapping[str, Any]) -> str:
    name = obj.get("metadata", {}).get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("object has no metadata.name")
    return name


class ApiClient:
    """One apiserver: requests on raw dicts, raising ApiError on any failure.

    Build it with :meth:`from_kubeconfig` or :meth:`from_kubeconfig_dict`; the
    constructor takes a ready ``httpx2.AsyncClient`` (its ``base_url`` is the
    apiserver) so tests can hand in a mock transport. Close it with
    :meth:`aclose` or ``async with``.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        cluster: str = "default",
        options: ApiOptions | None = None,
        on_request: Callable[[RequestRecord], None] | None = None,
        direct: DirectSender | None = None,
    ) -> None:
        self.cluster = cluster
        self._http = http
        # Plain reads and writes skip httpx2 (see kube/transport.py); streams use it.
        self._direct = direct
        self._options = options or ApiOptions()
        # Called with every finished request (metrics); settable, like write_fence.
        self.on_request = on_request
        self._counts: Counter[str] = Counter()
        # See ApiOptions.write_fence; settable, e.g. once start-up writes are done.
        self.write_fence = self._options.write_fence
        # Whether the last request got an answer: an outage is logged once when it
        # starts and once when it ends, not once per request that meets it.
        self._answering = True

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | Path,
        context: str | None = None,
        *,
        cluster: str | None = None,
        options: ApiOptions | None = None,
        on_request: Callable[[RequestRecord], None] | None = None,
    ) -> ApiClient:
        """A client for ``context`` (default: the current context) of a kubeconfig file.

        ``cluster`` names the client in logs and metrics; it defaults to the context name.
        """
        try:
            config = KubeConfig.from_file(path)
        except _CONFIG_ERRORS as exc:
            raise KubeconfigError(
                f"cannot load kubeconfig {path}: {library_problem(exc)}"
            ) from None
        return cls._from_config(config, context, cluster, options, on_request)

    @classmethod
    def from_environment(
        cls,
        context: str | None = None,
        *,
        cluster: str | None = None,
        options: ApiOptions | None = None,
        on_request: Callable[[RequestRecord], None] | None = None,
    ) -> ApiClient:
        """Like kubectl: ``$KUBECONFIG``, else ``~/.kube/config``, else the in-cluster service account."""
        try:
            config = KubeConfig.from_env()
        except _CONFIG_ERRORS as exc:
            raise KubeconfigError(
                "no kubeconfig found ($KUBECONFIG, ~/.kube/config, in-cluster): "
                + library_problem(exc)
            ) from None
        return cls._from_config(config, context, cluster, options, on_request)

    @classmethod
    def from_kubeconfig_dict(
        cls,
        kubeconfig: Mapping[str, Any],
        context: str | None = None,
        *,
        cluster: str | None = None,
        options: ApiOptions | None = None,
        on_request: Callable[[RequestRecord], None] | None = None,
    ) -> ApiClient:
        """Like :meth:`from_kubeconfig` for an already parsed kubeconfig (e.g. from a Secret).

        Certificates and keys must be inline (``*-data``): there is no file to
        resolve relative paths against.
        """
        try:
            config = KubeConfig.from_dict(dict(kubeconfig))
        except _CONFIG_ERRORS as exc:
            raise KubeconfigError(f"invalid kubeconfig: {library_problem(exc)}") from None
        return cls._from_config(config, context, cluster, options, on_request)

    @classmethod
    def _from_config(
        cls,
        config: Any,
        context: str | None,
        cluster: str | None,
        options: ApiOptions | None,
        on_request: Callable[[RequestRecord], None] | None,
    ) -> ApiClient:
        options = options or ApiOptions()
        timeout = httpx2.Timeout(options.request_timeout, connect=options.connect_timeout)
        try:
            single = config.get(context_name=context)
            # lightkube's client_adapter.AsyncClient() would build the same client
            # but cannot pass pool limits or default headers; its httpx_params()
            # gives us the part that matters (TLS, client certs, token/exec auth).
            params = ConnectionParams(
                timeout=timeout, trust_env=options.trust_env, http2=options.http2
            ).httpx_params(single)
            headers = {"User-Agent": options.user_agent, "Accept": "application/json"}
            direct = None
            if not options.http2:
                transport = AiohttpTransport(
                    params["verify"],
                    max_connections=options.max_connections,
                    keepalive_expiry=options.keepalive_expiry,
                    proxy=env_proxy(params["base_url"]) if options.trust_env else None,
                )
                params["transport"] = transport
                auth = direct_auth_headers(params["auth"], params["base_url"])
                if auth is not None:
                    direct = DirectSender(
                        transport,
                        params["base_url"],
                        {**headers, **auth},
                        connect_timeout=options.connect_timeout,
                    )
            http = httpx2.AsyncClient(
                **params,
                limits=httpx2.Limits(
                    max_connections=options.max_connections,
                    max_keepalive_connections=options.max_connections,
                    keepalive_expiry=options.keepalive_expiry,
                ),
                headers=headers,
            )
        except _CONFIG_ERRORS as exc:
            raise KubeconfigError(
                f"cannot use kubeconfig context {context!r}: {library_problem(exc)}"
            ) from None
        name = cluster or str(single.context_name)
        return cls(http, cluster=name, options=options, on_request=on_request, direct=direct)

    @property
    def server(self) -> str:
        """The apiserver's URL."""
        return str(self._http.base_url).rstrip("/")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def request_counts(self) -> Mapping[str, int]:
        """Requests sent so far, per Kubernetes verb (a snapshot)."""
        return dict(self._counts)

    # -- reads ---------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self._call("get", "GET", resource, _path(resource, namespace, name))

    async def version(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The apiserver's ``/version`` (``gitVersion`` and the rest): a cheap liveness probe.

        ``timeout`` bounds this one request (connect, TLS handshake and answer).
        """
        return await self._call("get", "GET", _VERSION, "/version", timeout=timeout)

    async def discover(self, group: str, version: str) -> list[dict[str, Any]]:
        """The resources the apiserver serves in ``group/version`` (discovery's APIResourceList)."""
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        discovery = Resource(group, version, "", "APIResourceList", namespaced=False)
        found = await self._call("get", "GET", discovery, path)
        resources: list[dict[str, Any]] = found.get("resources") or []
        return resources

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        transform: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    ) -> ListResult:
        """Every matching object, fetched in pages of ``limit``.

        Items get ``apiVersion`` and ``kind`` filled in (the apiserver omits
        them inside lists), so a listed object looks like a fetched one.
        ``transform`` slims (or, returning None, drops) each item as its page
        arrives, so a large list never holds every full object at once.
        """
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = _path(resource, namespace)
        items: list[dict[str, Any]] = []
        metadata: dict[str, Any] = {}
        continue_token = ""
        while True:
            page_params = dict(params)
            if limit > 0:
                page_params["limit"] = str(limit)
            if continue_token:
                page_params["continue"] = continue_token
            try:
                page = await self._call("list", "GET", resource, path, params=page_params)
            except ApiError as exc:
                if not (continue_token and exc.is_gone):
                    raise
                # The continue token outlived etcd compaction mid-pagination; like
                # client-go's pager, fall back to one consistent unpaginated list.
                _log.info(
                    "%s: continue token expired listing %s, relisting in one page",
                    self.cluster,
                    resource.plural,
                )
                items, continue_token, limit = [], "", 0
                continue
            for item in page.get("items") or ():
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                kept = transform(item) if transform else item
                if kept is not None:
                    items.append(kept)
            metadata = page.get("metadata") or {}
            continue_token = metadata.get("continue") or ""
            if not continue_token:
                break
        return ListResult(items=items, resource_version=str(metadata.get("resourceVersion", "")))

    async def review(self, resource: Resource, review: Mapping[str, Any]) -> dict[str, Any]:
        """POST a review (TokenReview, SubjectAccessReview) and return it with its status.

        Nothing is stored, so the write fence does not apply: a standby answers
        its callers too.
        """
        return await self._call(
            "create", "POST", resource, _path(resource, None), body=review, fenced=False
        )

    @contextlib.asynccontextmanager
    async def pod_log(
        self,
        namespace: str,
        pod: str,
        params: Mapping[str, str],
        *,
        follow_idle_timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Stream ``pods/{pod}/log`` (the kubelet's log via the apiserver): yields the chunks.

        ``params`` are the log options (container, previous, tailLines, follow...).
        A follow waits at most ``follow_idle_timeout`` seconds for each chunk
        (None: for ever); ApiError for any refusal or a broken stream.
        """
        opts = self._options
        timeout = httpx2.Timeout(
            connect=opts.connect_timeout,
            read=follow_idle_timeout if params.get("follow") == "true" else opts.request_timeout,
            write=opts.request_timeout,
            pool=opts.request_timeout,
        )
        path = f"{_path(PODS, namespace, pod)}/log"
        request = self._http.build_request(
            "GET", path, params=dict(params), timeout=timeout, headers={"Accept": "*/*"}
        )
        response = await self._open_stream(request, "get", PODS)
        try:
            chunks = response.aiter_bytes()
            try:
                yield chunks
            finally:
                await chunks.aclose()
        except httpx2.ReadTimeout:
            # A quiet pod, not a worker that does not answer.
            raise ApiError(0, "Timeout", "no log output within the idle time-out") from None
        except httpx2.HTTPError as exc:
            raise self._unreachable(exc) from exc
        finally:
            await response.aclose()

    # -- writes --------------------------------------------------------------

    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """POST ``obj``; for namespaced kinds the namespace defaults to its metadata's.

        ``dry_run``: admission judges it, nothing is stored.
        """
        ns = _namespace_of(resource, obj, namespace)
        if resource.namespaced and not ns:
            raise ValueError(f"{resource.plural} are namespaced; a namespace is required")
        params = {"fieldManager": field_manager} if field_manager else {}
        if dry_run:
            params["dryRun"] = "All"
        # A dry run stores nothing: counted as its own verb, not as a write.
        verb = "dryrun" if dry_run else "create"
        return await self._call(
            verb, "POST", resource, _path(resource, ns), params=params, body=obj
        )

    async def replace(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT ``obj`` (optimistic concurrency on its metadata.resourceVersion).

        ``subresource="status"`` replaces only the status, the way controllers own it.
        """
        ns = _namespace_of(resource, obj, namespace)
        path = _path(resource, ns, _name_of(obj))
        if subresource:
            path = f"{path}/{subresource}"
        params = {"fieldManager": field_manager} if field_manager else None
        return await self._call("update", "PUT", resource, path, params=params, body=obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """PATCH ``name``. Server-side apply (``PatchType.APPLY``) needs ``field_manager``;
        ``force`` takes over fields other managers own."""
        path = _path(resource, namespace, name)
        if subresource:
            path = f"{path}/{subresource}"
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if patch_type is PatchType.APPLY:
            if not field_manager:
                raise ValueError("server-side apply requires a field_manager")
            if force:
                params["force"] = "true"
        return await self._call(
            "patch",
            "PATCH",
            resource,
            path,
            params=params,
            body=patch,
            content_type=patch_type.value,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any]:
        """DELETE ``name``; returns the object (while finalizers run) or a Status.

        ``uid`` / ``resource_version`` are preconditions: the apiserver answers
        409 Conflict instead of deleting a different incarnation of the name.
        The default ``Background`` propagation deletes a Job's Pods too (the
        apiserver's default for Jobs, ``orphan``, would leave them running).
        """
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        preconditions = {
            key: value
            for key, value in (("uid", uid), ("resourceVersion", resource_version))
            if value
        }
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return await self._call(
            "delete", "DELETE", resource, _path(resource, namespace, name), body=options
        )

    # -- watch ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        """Open a watch; yields an iterator of events that ends when the server closes it.

        Raises ApiError when the apiserver refuses the watch (410 for a too-old
        ``resource_version``). A stream may still deliver an ERROR event whose
        object is a Status. Nothing here detects a silent dead connection:
        callers bound the wait for the next event (the Informer does).
        """
        params: dict[str, str] = {"watch": "true"}
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if resource_version:
            params["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        opts = self._options
        # The server ends the stream after timeoutSeconds; a read that waits much
        # longer than that means the connection is gone.
        read_timeout = None if timeout_seconds is None else timeout_seconds + opts.request_timeout
        timeout = httpx2.Timeout(
            connect=opts.connect_timeout,
            read=read_timeout,
            write=opts.request_timeout,
            pool=opts.request_timeout,
        )
        request = self._http.build_request(
            "GET", _path(resource, namespace), params=params, timeout=timeout
        )
        response = await self._open_stream(request, "watch", resource, direct=True)
        try:
            events = _decode_events(response)
            try:
                yield events
            finally:
                await events.aclose()
        except httpx2.HTTPError as exc:
            # The connection broke mid-stream; the consumer sees it as an ApiError too.
            raise self._unreachable(exc) from exc
        finally:
            await response.aclose()

    # -- internals -----------------------------------------------------------

    async def _open_stream(
        self, request: httpx2.Request, verb: str, resource: Resource, *, direct: bool = False
    ) -> StreamedResponse:
        """Send a streaming GET and record it; the open response when the server said 200
        (the caller reads and closes it), else ApiError with the response closed.

        ``direct``: over the direct path when there is one (its own headers).
        """
        started = time.monotonic()
        code = 0
        try:
            response: StreamedResponse | None = None
            if direct and self._direct is not None:
                response = await self._direct.open(request)
                if response.status_code == 401 and "Authorization" in self._direct.headers:
                    await response.aclose()  # the credential's own flow tries again below
                    response = None
            if response is None:
                response = await self._http.send(request, stream=True)
            code = response.status_code
        except httpx2.HTTPError as exc:
            raise self._unreachable(exc) from exc
        except _EXEC_ERRORS as exc:  # an exec credential plugin failed, or printed no token
            raise ApiError(0, "Unauthorized", _exec_problem(exc)) from None
        finally:
            self._record(verb, resource, code, time.monotonic() - started)
        if code != 200:
            try:
                raise _error_from_body(code, await response.aread())
            except httpx2.HTTPError as exc:
                raise self._unreachable(exc) from exc
            finally:
                await response.aclose()
        return response

    async def _call(
        self,
        verb: str,
        method: str,
        resource: Resource,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        fenced: bool = True,
    ) -> dict[str, Any]:
        if fenced and method != "GET" and self.write_fence is not None and not self.write_fence():
            raise WriteFenced(verb, resource.plural)
        content = None if body is None else _json_encoder.encode(body)
        headers = {"Content-Type": content_type} if content is not None else None
        started = time.monotonic()
        code = 0
        try:
            if self._direct is not None:
                code, answer = await self._direct.send(
                    method,
                    path,
                    params=params,
                    content=content,
                    headers=headers,
                    timeout=self._options.request_timeout if timeout is None else timeout,
                )
            if self._direct is None or (code == 401 and "Authorization" in self._direct.headers):
                # Without the direct path, or its token refused: httpx2 runs the
                # credential's own flow (a token file is read again).
                extra: dict[str, Any] = (
                    {} if timeout is None else {"timeout": httpx2.Timeout(timeout)}
                )
                response = await self._http.request(
                    method, path, params=params, content=content, headers=headers, **extra
                )
                code, answer = response.status_code, response.content
                if self._direct is not None and code != 401:
                    self._direct.refresh(self._http.auth)
        except httpx2.HTTPError as exc:
            raise self._unreachable(exc) from exc
        except _EXEC_ERRORS as exc:  # an exec credential plugin failed, or printed no token
            raise ApiError(0, "Unauthorized", _exec_problem(exc)) from None
        finally:
            self._record(verb, resource, code, time.monotonic() - started)
        if code >= 400:
            raise _error_from_body(code, answer)
        try:
            decoded = msgspec.json.decode(answer)
        except msgspec.DecodeError as exc:
            raise ApiError(code, "InvalidResponse", f"undecodable body: {exc}") from exc
        if not isinstance(decoded, dict):
            raise ApiError(code, "InvalidResponse", "response body is not a JSON object")
        return decoded

    def _unreachable(self, exc: httpx2.HTTPError) -> ApiError:
        error = _unreachable(exc)
        if self._answering:
            self._answering = False
            _log.warning(
                "apiserver %s does not answer (%s): requests to it are retried with backoff",
                self.cluster,
                error.message,
                extra={"cluster": self.cluster},
            )
        return error

    @property
    def answering(self) -> bool:
        """Whether the last request to this apiserver got an answer (any HTTP status)."""
        return self._answering

    def _record(self, verb: str, resource: Resource, code: int, seconds: float) -> None:
        self._counts[verb] += 1
        if code and not self._answering:
            self._answering = True
            _log.info("apiserver %s answers again", self.cluster, extra={"cluster": self.cluster})
        if self.on_request is None:
            return
        try:
            self.on_request(RequestRecord(self.cluster, verb, resource.plural, code, seconds))
        except Exception:
            # Metrics must never break a request.
            _log.exception("on_request hook failed")


def _unreachable(exc: httpx2.HTTPError) -> ApiError:
    reason = "Timeout" if isinstance(exc, httpx2.TimeoutException) else "Unreachable"
    message = f"{type(exc).__name__}: {exc}"
    # httpx says "All connection attempts failed"; the OSError at the end of the
    # chain says why and where ("[Errno 111] Connect call failed ('127.0.0.1', 6443)").
    cause: BaseException | None = exc
    root: OSError | None = None
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno is not None:
            root = cause
        cause = cause.__cause__ or cause.__context__
    if root is not None and str(root) not in message:
        message += f" ({type(root).__name__}: {root})"
    return ApiError(0, reason, message)


async def _decode_events(response: StreamedResponse) -> AsyncGenerator[WatchEvent]:
    async for line in _split_lines(response.aiter_bytes()):
        try:
            yield _watch_event_decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise ApiError(200, "InvalidResponse", f"undecodable watch event: {exc}") from exc


async def _split_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes | bytearray]:
    """Newline-delimited records from arbitrarily cut chunks.

    A large object arrives over many chunks; each chunk is scanned once and
    appended once, so the cost stays linear in the line's size.
    """
    pending = bytearray()
    async for chunk in chunks:
        start = 0
        if pending:
            newline = chunk.find(b"\n")
            if newline < 0:
                pending += chunk
                continue
            pending += memoryview(chunk)[:newline]
            # Hand out the buffer itself and start a new one: no copy of a big line.
            line, pending = pending, bytearray()
            yield line
            start = newline + 1
        while (newline := chunk.find(b"\n", start)) >= 0:
            if newline > start:
                yield chunk[start:newline]
            start = newline + 1
        if start < len(chunk):
            pending += memoryview(chunk)[start:]
    if pending.strip():
        yield pending
