"""The decisions of the controller's aggregated API (remote logs, mirror view): pure.

Routes and their paths under ``/apis/api.jobrelay.dev/v1alpha1``, the discovery
documents the aggregator and kubectl read, query parsing (and the query `jobrelay
logs` sends), the SubjectAccessReview to ask, which mirror a request reads (the one
the relay follows: :mod:`jobrelay.kinds.followed`), which of its pods (the kind's
adapter says which are its own: :mod:`jobrelay.kinds.mirror_pods`), what a pod looks
like to a user, refusals as Kubernetes ``Status`` bodies (written and read). Whom the API trusts is in ``trust_rules.py``, the bounds of its streams in
``stream_rules.py``. The I/O around them is in ``httpserver.py`` (HTTP),
``handler.py``, ``trust.py`` and ``serving.py`` (the apiservers) and ``client.py``
(the user's side).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from jobrelay.kinds.followed import followed_mirror
from jobrelay.vocabulary.meta import Meta

__all__ = [
    "API_GROUP",
    "API_PATH",
    "API_VERSION",
    "LOG",
    "MIRROR",
    "POD_HEADER",
    "BadRequest",
    "Limits",
    "LogQuery",
    "RelayError",
    "Route",
    "User",
    "access_review",
    "allowed",
    "choose_pods",
    "current_mirror",
    "discovery",
    "job_path",
    "kubelet_params",
    "log_params",
    "match_route",
    "parse_log_query",
    "plural_of",
    "pod_summary",
    "refusal",
    "scrub",
    "status_body",
]

# The aggregated API: APIService v1alpha1.api.jobrelay.dev, served under API_PATH.
API_GROUP = "api.jobrelay.dev"
API_VERSION = "v1alpha1"
API_PATH = f"/apis/{API_GROUP}/{API_VERSION}"
# The subresources of every dispatched kind.
LOG = "log"
MIRROR = "mirror"
# The response header of a logs stream naming the pods it reads (names only).
POD_HEADER = "jobrelay-pods"


class BadRequest(ValueError):
    """A request the API cannot serve as asked (400); the message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of the API (flags of ``jobrelay run``)."""

    # Pod log streams one caller (user name) may hold open at once (an --all-pods
    # request holds one per pod).
    max_streams_per_user: int = 100
    # Pod log streams open at once from one worker: its own connection pool for
    # users' streams, apart from the probe's, the informers' and the mirror writes'.
    max_streams_per_worker: int = 200
    # Pod log streams open at once in all.
    max_streams: int = 500
    # Bytes one non-follow log request returns at most (the rest is cut).
    max_bytes: int = 10 * 1024 * 1024
    # A follow ends when its pod writes nothing for this many seconds.
    follow_idle_timeout: float = 300.0
    # Bytes one followed pod stream passes on at most, and how fast (bytes a second).
    max_follow_bytes: int = 1024 * 1024 * 1024
    follow_rate: int = 1024 * 1024
    # A caller that takes longer than this to accept each write is dropped (its streams end).
    write_timeout: float = 30.0
    # Panel watches (the dashboard's live views) open at once in all, and per user name
    # (a dashboard holds three: about six tabs of one user).
    max_watches: int = 200
    max_watches_per_user: int = 20


@dataclass(frozen=True, slots=True)
class User:
    """The caller, as the manager's authenticator knows it."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Route:
    what: Literal["log", "mirror"]
    namespace: str
    plural: str  # the kind's resource (jobs, jobsets, ...)
    name: str


_DNS_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_ROUTE = re.compile(
    rf"^{re.escape(API_PATH)}/namespaces/(?P<ns>{_DNS_NAME})/(?P<plural>[a-z0-9][-a-z0-9.]{{0,62}})"
    rf"/(?P<name>{_DNS_NAME})/(?P<what>log|mirror)$"
)


def match_route(path: str) -> Route | None:
    """``{API_PATH}/namespaces/{ns}/{plural}/{name}/log`` or ``.../mirror``; None for
    anything else."""
    found = _ROUTE.match(path)
    if found is None:
        return None
    what: Literal["log", "mirror"] = "log" if found["what"] == LOG else "mirror"
    return Route(what, found["ns"], found["plural"], found["name"])


def job_path(namespace: str, plural: str, name: str, what: str) -> str:
    """The path of a route (``what``: log or mirror), as :func:`match_route` reads it."""
    return (
        f"{API_PATH}/namespaces/{quote(namespace, safe='')}/{quote(plural, safe='')}"
        f"/{quote(name, safe='')}/{what}"
    )


def discovery(path: str, plurals: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """The discovery document of ``path`` (``/apis``, the group, the version), None for
    any other path. ``plurals``: (plural, Kind) of each dispatched kind, whose ``log`` and
    ``mirror`` subresources the version's APIResourceList names (what kubectl and the
    aggregator's availability check read)."""
    version = {"groupVersion": f"{API_GROUP}/{API_VERSION}", "version": API_VERSION}
    group = {
        "name": API_GROUP,
        "versions": [version],
        "preferredVersion": version,
    }
    if path.rstrip("/") == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}
    if path.rstrip("/") == f"/apis/{API_GROUP}":
        return {"kind": "APIGroup", "apiVersion": "v1", **group}
    if path.rstrip("/") != API_PATH:
        return None
    resources = [
        {
            "name": f"{plural}/{sub}",
            "singularName": "",
            "namespaced": True,
            "kind": kind if sub == MIRROR else "Pod",
            "verbs": ["get"],
        }
        for plural, kind in sorted(set(plurals))
        for sub in (LOG, MIRROR)
    ]
    # A namespace's waiting workloads, their queues and positions (pending_rules).
    resources.append({"name": "pendingworkloads", "singularName": "", "namespaced": True,
                      "kind": "PendingWorkload", "verbs": ["list"]})  # fmt: skip
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{API_GROUP}/{API_VERSION}",
        "resources": resources,
    }


def plural_of(kind: str, resources: Sequence[Mapping[str, Any]]) -> str:
    """The resource of ``kind`` (a Kind, ``Kind.version.group`` as `jobrelay run --kind`
    takes it, or its plural, any case) among the version's APIResourceList
    ``resources``; else as Kubernetes names most: lower case plus "s"."""
    wanted = kind.lower().partition(".")[0]
    for resource in resources:
        plural, _, sub = str(resource.get("name") or "").partition("/")
        if sub == MIRROR and wanted in (plural, str(resource.get("kind") or "").lower()):
            return plural
    return wanted if wanted.endswith("s") else f"{wanted}s"


@dataclass(frozen=True, slots=True)
class LogQuery:
    container: str = ""
    index: int | None = None
    all_pods: bool = False
    previous: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    timestamps: bool = False
    follow: bool = False
    limit_bytes: int | None = None
    all_containers: bool = False  # every container of each pod (kubectl --all-containers)
    prefix: bool = False  # each line after [pod/NAME/CONTAINER] (kubectl --prefix)


_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False, "": True}
_LOG_PARAMS = frozenset(
    ("container", "index", "allPods", "previous", "tailLines", "sinceSeconds",
     "timestamps", "follow", "limitBytes", "allContainers", "prefix")
)  # fmt: skip


_COUNT = re.compile(r"[0-9]{1,18}")


def _bool(params: Mapping[str, str], name: str) -> bool:
    text = params.get(name)
    if text is None:
        return False
    if text.lower() not in _BOOLS:
        raise BadRequest(f"{name}={text[:40]!r}: expected true or false")
    return _BOOLS[text.lower()]


def _count(params: Mapping[str, str], name: str, *, least: int) -> int | None:
    text = params.get(name)
    if text is None or text == "":
        return None
    # ASCII digits only, and few of them: str.isdigit() takes "²" (which int() refuses)
    # and int() of thousands of digits raises too.
    if not _COUNT.fullmatch(text) or int(text) < least:
        raise BadRequest(f"{name}={text[:40]!r}: expected a whole number of at least {least}")
    return int(text)


def parse_log_query(params: Mapping[str, str]) -> LogQuery:
    """The query of a logs request, checked; BadRequest says what is wrong."""
    unknown = sorted(set(params) - _LOG_PARAMS)
    if unknown:
        raise BadRequest(f"unknown parameter(s): {', '.join(unknown)}")
    query = LogQuery(
        container=params.get("container", ""),
        index=_count(params, "index", least=0),
        all_pods=_bool(params, "allPods"),
        previous=_bool(params, "previous"),
        tail_lines=_count(params, "tailLines", least=0),
        since_seconds=_count(params, "sinceSeconds", least=1),
        timestamps=_bool(params, "timestamps"),
        follow=_bool(params, "follow"),
        limit_bytes=_count(params, "limitBytes", least=1),
        all_containers=_bool(params, "allContainers"),
        prefix=_bool(params, "prefix"),
    )
    if query.all_containers and query.container:
        raise BadRequest("container and allContainers exclude each other")
    if query.all_pods and query.index is not None:
        raise BadRequest("index and allPods exclude each other")
    if query.previous and query.follow:
        raise BadRequest("previous and follow exclude each other (a previous container has ended)")
    return query


def log_params(options: Mapping[str, Any]) -> dict[str, str]:
    """The API's query from `jobrelay logs` options (None and False left out)."""
    names = {
        "container": "container", "index": "index", "all_pods": "allPods",
        "previous": "previous", "tail": "tailLines", "since": "sinceSeconds",
        "timestamps": "timestamps", "follow": "follow", "limit_bytes": "limitBytes",
        "all_containers": "allContainers", "prefix": "prefix",
    }  # fmt: skip
    params: dict[str, str] = {}
    for option, param in names.items():
        value = options.get(option)
        if value is None or value is False or value == "":
            continue
        params[param] = "true" if value is True else str(value)
    return params


def kubelet_params(query: LogQuery) -> dict[str, str]:
    """The ``pods/{pod}/log`` options of a query (as kubectl sends them)."""
    params: dict[str, str] = {}
    if query.container:
        params["container"] = query.container
    if query.previous:
        params["previous"] = "true"
    if query.follow:
        params["follow"] = "true"
    if query.timestamps:
        params["timestamps"] = "true"
    if query.tail_lines is not None:
        params["tailLines"] = str(query.tail_lines)
    if query.since_seconds is not None:
        params["sinceSeconds"] = str(query.since_seconds)
    if query.limit_bytes is not None:
        params["limitBytes"] = str(query.limit_bytes)
    return params


def current_mirror(
    obj: dict[str, Any],
    cached: Iterable[tuple[str, dict[str, Any] | None]],
    *,
    controller_name: str,
    origin: str,
    created: Callable[[str], tuple[int, str] | None] = lambda _worker: None,
) -> tuple[str, dict[str, Any]] | None:
    """The worker and mirror of ``obj``'s current run among jobrelay's own caches
    ((worker, cached mirror) pairs): the one the relay follows, its UID recorded on the
    object (:func:`~jobrelay.kinds.followed.followed_mirror`); never the highest run a
    worker claims, which a worker can forge."""
    return followed_mirror(
        obj, cached, controller_name=controller_name, origin=origin, created=created
    )


def _created(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = Meta(pod)
    return meta.creation_timestamp, meta.name


def choose_pods(
    pods: Sequence[Mapping[str, Any]],
    *,
    index: int | None,
    all_pods: bool,
    index_of: Callable[[Mapping[str, Any]], str | None] = lambda _pod: None,
) -> list[Mapping[str, Any]]:
    """The pods a logs request reads: all (oldest first), those of an index (the newest
    of them; ``index_of``: a pod's, as its kind numbers them), or the newest pod. Empty
    when none fits."""
    ordered = sorted(pods, key=_created)
    if all_pods:
        return list(ordered)
    if index is not None:
        ordered = [pod for pod in ordered if index_of(pod) == str(index)]
    return ordered[-1:]


def pod_summary(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What a user sees of a mirror's pod: never its worker's addresses (no IPs)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    ready = sum(1 for c in containers if c.get("ready"))
    last_state = {str(c.get("name")): c.get("lastState") for c in containers if c.get("lastState")}
    conditions = [
        {k: v for k, v in condition.items() if k in ("type", "status", "reason", "message")}
        for condition in status.get("conditions") or []
    ]
    return {
        "name": metadata.get("name"),
        "phase": status.get("phase") or "Unknown",
        "node": spec.get("nodeName") or "",
        "restarts": restarts,
        "ready": f"{ready}/{len(spec.get('containers') or containers)}",
        "lastState": last_state,
        "conditions": conditions,
    }


# -- who is asking ------------------------------------------------------------


def access_review(
    user: User,
    *,
    namespace: str,
    resource: str,
    group: str = "",
    subresource: str = "",
    name: str = "",
    verb: str = "get",
) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` may ``verb`` the resource."""
    attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
    if subresource:
        attributes["subresource"] = subresource
    if name:
        attributes["name"] = name
    spec: dict[str, Any] = {
        "user": user.name,
        "groups": list(user.groups),
        "resourceAttributes": attributes,
    }
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": spec,
    }


def allowed(review: Mapping[str, Any]) -> bool:
    status = review.get("status") or {}
    return status.get("allowed") is True and status.get("denied") is not True


# -- answers --------------------------------------------------------------------


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


def status_body(code: int, message: str, reason: str = "") -> bytes:
    """A Kubernetes ``Status`` (what kubectl prints for an apiserver's refusal)."""
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason or _REASONS.get(code, "Unknown"),
            "code": code,
        }
    ).encode()


class RelayError(Exception):
    """The API refused (code, reason and message from its Status), or did not answer (code 0)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


def refusal(code: int, body: bytes) -> RelayError:
    """A refusal as the client reads it: a ``Status`` body's reason and message, else the
    start of whatever the body is."""
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        return RelayError(code, str(status.get("reason") or ""), str(status.get("message") or ""))
    return RelayError(code, f"HTTP {code}", body[:300].decode("utf-8", "replace").strip())


_URL = re.compile(
    r"\b(?:https?|wss?)://\S+|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9a-fA-F:]+\](?::\d+)?"
)


def scrub(message: str) -> str:
    """A worker's message without any address in it (URLs, IPs): what a user may read."""
    return _URL.sub("<worker>", message)
