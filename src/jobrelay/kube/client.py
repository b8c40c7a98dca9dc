"""A thin asynchronous client for one Kubernetes apiserver, on plain JSON dicts: its verbs.

Objects stay ``dict[str, Any]`` decoded straight from the response bytes with
msgspec: jobrelay copies Jobs between clusters and must never lose a field it
does not know, which typed models would do. lightkube only supplies the
connection (:mod:`jobrelay.kube.connecting`); how a request travels
(:mod:`jobrelay.kube.requesting`), errors (:mod:`jobrelay.kube.errors`) and
streams (:mod:`jobrelay.kube.streams`) are ours.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from lightkube.config.kubeconfig import KubeConfig

from jobrelay.kube.connecting import (
    ApiOptions,
    connect,
    environment_kubeconfig,
    kubeconfig_file,
    kubeconfig_of,
)
from jobrelay.kube.errors import ApiError, ResponseTooLarge
from jobrelay.kube.requesting import Requester, RequestRecord
from jobrelay.kube.resources import PODS, VERSION, resource_path
from jobrelay.kube.streams import (
    WatchEvent,
    log_chunks,
    log_timeout,
    watch_events,
    watch_params,
    watch_timeout,
)
from jobrelay.vocabulary.collection_pause import collection_paused
from jobrelay.vocabulary.resource import Resource

__all__ = ["ApiClient", "ListResult", "PatchType"]

_log = logging.getLogger(__name__)


class PatchType(enum.StrEnum):
    """The Content-Type that selects how the apiserver interprets a PATCH body."""

    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"  # JSON is YAML, so the body is still JSON


class ListResult(msgspec.Struct, frozen=True):
    """All items of a (possibly paginated) list, and the resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


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


class ApiClient(Requester):
    """One apiserver: requests on raw dicts, raising ApiError on any failure.

    Build it with :meth:`from_kubeconfig`, :meth:`from_environment` or
    :meth:`from_kubeconfig_dict`; the constructor takes a ready
    ``httpx2.AsyncClient`` (its ``base_url`` is the apiserver) so tests can hand
    in a mock transport. Close it with :meth:`aclose` or ``async with``.
    """

    # -- connecting ----------------------------------------------------------

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
        return cls._connected(kubeconfig_file(path), context, cluster, options, on_request)

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
        return cls._connected(environment_kubeconfig(), context, cluster, options, on_request)

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
        return cls._connected(kubeconfig_of(kubeconfig), context, cluster, options, on_request)

    @classmethod
    def _connected(
        cls,
        config: KubeConfig,
        context: str | None,
        cluster: str | None,
        options: ApiOptions | None,
        on_request: Callable[[RequestRecord], None] | None,
    ) -> ApiClient:
        options = options or ApiOptions()
        connection = connect(config, context, options)
        return cls(
            connection.http,
            cluster=cluster or connection.context,
            options=options,
            on_request=on_request,
            direct=connection.direct,
        )

    # -- reads ---------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self._call("get", "GET", resource, resource_path(resource, namespace, name))

    async def version(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The apiserver's ``/version`` (``gitVersion`` and the rest): a cheap liveness probe.

        ``timeout`` bounds this one request (connect, TLS handshake and answer).
        """
        return await self._call("get", "GET", VERSION, "/version", timeout=timeout)

    async def discover(self, group: str, version: str) -> list[dict[str, Any]]:
        """The resources the apiserver serves in ``group/version`` (discovery's APIResourceList)."""
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        discovery = Resource(group, version, "", "APIResourceList", namespaced=False)
        found = await self._call("get", "GET", discovery, path)
        resources: list[dict[str, Any]] = found.get("resources") or []
        return resources

    async def group_versions(self, group: str) -> list[str]:
        """The versions the apiserver serves of API ``group`` ([] when it serves none)."""
        discovery = Resource(group, "", "", "APIGroup", namespaced=False)
        try:
            found = await self._call("get", "GET", discovery, f"/apis/{group}")
        except ApiError as error:
            if error.is_not_found:
                return []
            raise
        versions = found.get("versions") or []
        return [str(v.get("version")) for v in versions if isinstance(v, dict) and v.get("version")]

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

        A page longer than ApiOptions' body cap (tenants' big objects: Go writes
        ``<`` as six bytes) is asked again with half the ``limit``, down to 1, from
        the same continue token; the rest of the list keeps the smaller pages. Only
        one object past the cap on its own (impossible with the defaults: etcd keeps
        at most ~1.5 MiB per object) is ResponseTooLarge, saying where it stopped.
        """
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = resource_path(resource, namespace)
        items: list[dict[str, Any]] = []
        metadata: dict[str, Any] = {}
        continue_token = ""
        paged_limit = limit_asked = limit  # the page size once pages have shrunk
        whole_allowed = True  # the one-page fallback, until it proved too long
        while True:
            page_params = dict(params)
            if limit > 0:
                page_params["limit"] = str(limit)
            if continue_token:
                page_params["continue"] = continue_token
            try:
                page = await self._call("list", "GET", resource, path, params=page_params)
            except ResponseTooLarge as exc:
                if limit == 0 and paged_limit > 0:
                    # The one-page fallback after an expired token is too long too:
                    # a fresh paged list, in pages of the size that was read last.
                    items, continue_token, limit, whole_allowed = [], "", paged_limit, False
                    continue
                if limit <= 1:
                    raise ResponseTooLarge(
                        exc.code, f"one {resource.kind} on its own (after {len(items)} "
                        f"listed{' in ' + namespace if namespace else ''})",
                        self._options.max_body_bytes,
                    ) from exc  # fmt: skip
                limit = paged_limit = limit // 2
                continue
            except ApiError as exc:
                if not (continue_token and exc.is_gone and whole_allowed):
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
            with collection_paused():  # as the page's decoding (kube/requesting.py)
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
        if 0 < paged_limit < limit_asked:
            _log.info(
                "%s: listed %d %s in pages of %d: pages of %d passed the body cap",
                self.cluster, len(items), resource.plural, paged_limit, limit_asked,
                extra={"cluster": self.cluster},
            )  # fmt: skip
        return ListResult(items=items, resource_version=str(metadata.get("resourceVersion", "")))

    async def review(self, resource: Resource, review: Mapping[str, Any]) -> dict[str, Any]:
        """POST a review (TokenReview, SubjectAccessReview) and return it with its status.

        Nothing is stored, so the write fence does not apply: a standby answers
        its callers too.
        """
        return await self._call(
            "create", "POST", resource, resource_path(resource, None), body=review, fenced=False
        )

    # -- streams -------------------------------------------------------------

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
        request = self._http.build_request(
            "GET",
            f"{resource_path(PODS, namespace, pod)}/log",
            params=dict(params),
            timeout=log_timeout(self._options, params, follow_idle_timeout),
            headers={"Accept": "*/*"},
        )
        response = await self._open_stream(request, "get", PODS)
        async with log_chunks(response, self._unreachable) as chunks:
            yield chunks

    async def get_subresource(
        self, resource: Resource, path: str, params: Mapping[str, str]
    ) -> dict[str, Any]:
        """A JSON object from ``path`` (an aggregated API's subresource of ``resource``)."""
        return await self._call("get", "GET", resource, path, params=params)

    @contextlib.asynccontextmanager
    async def stream_subresource(
        self, resource: Resource, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Stream ``path`` as ``pod_log`` streams a log (a follow waits for ever)."""
        request = self._http.build_request(
            "GET", path, params=dict(params),
            timeout=log_timeout(self._options, params, None), headers={"Accept": "*/*"},
        )  # fmt: skip
        response = await self._open_stream(request, "get", resource)
        async with log_chunks(response, self._unreachable) as chunks:
            yield chunks

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
        params = watch_params(
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
        )
        request = self._http.build_request(
            "GET",
            resource_path(resource, namespace),
            params=params,
            timeout=watch_timeout(self._options, timeout_seconds),
        )
        response = await self._open_stream(request, "watch", resource, direct=True)
        async with watch_events(
            response, self._unreachable, max_line=self._options.max_watch_line_bytes
        ) as events:
            yield events

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
            verb, "POST", resource, resource_path(resource, ns), params=params, body=obj
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
        path = resource_path(resource, ns, _name_of(obj))
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
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH ``name``. Server-side apply (``PatchType.APPLY``) needs ``field_manager``;
        ``force`` takes over fields other managers own. ``dry_run``: admission and the
        schema judge it (an apply that would create included), nothing is stored."""
        path = resource_path(resource, namespace, name)
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
        if dry_run:
            params["dryRun"] = "All"
        return await self._call(
            "dryrun" if dry_run else "patch",
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
            "delete", "DELETE", resource, resource_path(resource, namespace, name), body=options
        )
