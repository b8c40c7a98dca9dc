"""The aggregated API's handler: who may read what, where from, and within which bounds.

The manager's reviews and the worker's pods are fakes here; the real path (the aggregator's
front proxy, SubjectAccessReview, pods/log through a worker apiserver) is
tests/e2e/test_remote_logs.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.kubeflow import PyTorchJobKind
from jobrelay.kinds.ray import RayJobKind
from jobrelay.kube.client import ListResult
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.httpserver import Answer, HttpRequest, Stream
from jobrelay.relayapi.managedby_webhook_rules import WEBHOOK_PATH, ManagedByDefault
from jobrelay.relayapi.route_rules import API_PATH, Limits
from jobrelay.relayapi.trust_rules import FrontProxy

WORKER_SERVER = "https://10.9.8.7:6443"
PROXY = FrontProxy("the front proxy's CA", ("front-proxy-client",))


class Manager:
    """Answers SubjectAccessReviews from ``allowed``."""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, str, str, str]] = set()  # user, namespace, resource, sub
        self.reviews: list[dict[str, Any]] = []

    async def review(self, resource: Any, review: dict[str, Any]) -> dict[str, Any]:
        self.reviews.append(review)
        assert review["kind"] == "SubjectAccessReview"
        spec = review["spec"]
        attributes = spec["resourceAttributes"]
        key = (spec["user"], attributes["namespace"], attributes["resource"],
               attributes.get("subresource", ""))  # fmt: skip
        return {"status": {"allowed": key in self.allowed}}


@dataclass
class WorkerClient:
    pods: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, list[bytes]] = field(default_factory=dict)
    asked: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    server: str = WORKER_SERVER
    hold: asyncio.Event | None = None

    lists: list[dict[str, Any]] = field(default_factory=list)
    watches: int = 0
    # Other objects there, by (plural, name): what a kind's operator made.
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    gets: list[tuple[str, str]] = field(default_factory=list)

    async def list(self, resource: Any, **kwargs: Any) -> ListResult:
        self.lists.append(kwargs)
        selector = kwargs.get("label_selector") or ""
        key, _, value = selector.partition("=")
        pods = [
            pod for pod in self.pods
            if not selector or (pod["metadata"].get("labels") or {}).get(key) == value
        ]  # fmt: skip
        return ListResult(items=pods, resource_version="1")

    async def get(self, resource: Any, name: str, **kwargs: Any) -> dict[str, Any]:
        self.gets.append((resource.plural, name))
        found = self.objects.get((resource.plural, name))
        if found is None:
            raise ApiError(404, "NotFound", f"{resource.plural} {name!r} not found")
        return found

    @contextlib.asynccontextmanager
    async def watch(self, resource: Any, **kwargs: Any) -> AsyncIterator[AsyncIterator[Any]]:
        self.watches += 1

        async def events() -> AsyncIterator[Any]:
            await asyncio.Event().wait()  # nothing ever ends here
            yield None

        yield events()

    @contextlib.asynccontextmanager
    async def pod_log(
        self, namespace: str, pod: str, params: Mapping[str, str], **kwargs: Any
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.asked.append((pod, dict(params)))
        if pod not in self.logs:
            raise ApiError(400, "BadRequest", f'container "main" in pod "{pod}" is waiting; '
                           'Get "https://127.0.0.1:10250/containerLogs": refused')  # fmt: skip

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in self.logs[pod]:
                yield chunk
            if self.hold is not None:
                await self.hold.wait()

        yield chunks()


@dataclass
class Worker:
    client: WorkerClient
    name: str = "worker-a"
    connected: bool = True
    mirrors: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @property
    def streams(self) -> WorkerClient:
        return self.client

    def mirror(self, key: tuple[str, str]) -> dict[str, Any] | None:
        return self.mirrors.get(key)


class Pool:
    def __init__(self) -> None:
        self.by_name: dict[str, Worker] = {}

    def get(self, name: str) -> Worker | None:
        return self.by_name.get(name)

    def workers(self) -> list[Worker]:
        return list(self.by_name.values())

    def registrations(self) -> list[dict[str, Any]]:
        return [{"metadata": {"name": name}} for name in self.by_name]


CONTROLLER = "jobrelay.dev/controller"
ORIGIN = "origin-1"
MIRROR_UID = "mirror-uid-a"


def mirror_of(job: dict[str, Any], uid: str, run: int = 1) -> dict[str, Any]:
    """A mirror of ``job`` as the pool's caches hold it."""
    from jobrelay.kinds.mirrors import mirror_metadata

    metadata = mirror_metadata(job, controller_name=CONTROLLER, origin=ORIGIN, run=run)
    return {"metadata": {**metadata, "uid": uid}, "status": {"active": 2}}


class Objects(dict[str, dict[str, Any]]):
    """A kind's cache, telling its handlers of each change as an informer does."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.handlers: list[Callable[[InformerEvent], None]] = []

    def add_handler(self, handler: Callable[[InformerEvent], None]) -> None:
        self.handlers.append(handler)

    def _tell(self, key: str, old: Any, new: Any) -> None:
        change = Change.DELETED if new is None else Change.ADDED if old is None else Change.UPDATED
        for handler in self.handlers:
            handler(InformerEvent(change, key, old, new))

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        old = self.get(key)
        super().__setitem__(key, value)
        self._tell(key, old, value)

    def __delitem__(self, key: str) -> None:
        old = self[key]
        super().__delitem__(key)
        self._tell(key, old, None)


@dataclass
class Runtime:
    kind: Any
    objects: Objects


def _job(name: str, cluster: str | None, mirror_uid: str = MIRROR_UID) -> dict[str, Any]:
    """A management object placed on ``cluster`` (run 1), its mirror's UID recorded."""
    annotations = (
        {"jobrelay.dev/cluster": cluster, "jobrelay.dev/mirrors": f"1:{cluster}:{mirror_uid}"}
        if cluster
        else {}
    )
    return {"metadata": {"name": name, "namespace": "team-a", "uid": f"uid-of-{name}",
                         "annotations": annotations}}  # fmt: skip


def _pod(name: str, created: str, index: int = 0, owner: str = MIRROR_UID) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "creationTimestamp": created,
            "labels": {"batch.kubernetes.io/job-completion-index": str(index),
                       "batch.kubernetes.io/controller-uid": owner},
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": owner,
                                 "controller": True}],
        },
        "spec": {"nodeName": "kwok-node-0", "containers": [{"name": "main"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.5", "hostIP": "10.0.0.1"},
    }  # fmt: skip


@pytest.fixture
def setup() -> tuple[RelayApi, Manager, WorkerClient, Worker]:
    manager = Manager()
    manager.allowed = {("alice", "team-a", "pods", "log"), ("alice", "team-a", "jobs", "")}
    client = WorkerClient(
        pods=[_pod("train-0-aaa", "2026-01-01T00:00:01Z", 0),
              _pod("train-1-bbb", "2026-01-01T00:00:02Z", 1)],
        logs={"train-0-aaa": [b"zero\n"], "train-1-bbb": [b"one\n", b"more\n"]},
    )  # fmt: skip
    worker = Worker(client)
    train = _job("train", "worker-a")
    worker.mirrors[("Job.v1.batch", "team-a/train")] = mirror_of(train, MIRROR_UID)
    pool = Pool()
    pool.by_name["worker-a"] = worker
    objects = Objects({"team-a/train": train, "team-a/waiting": _job("waiting", None)})
    kinds = {"Job.v1.batch": Runtime(JobKind(), objects)}
    api = RelayApi(
        manager, pool, kinds, Limits(max_streams_per_user=2, max_bytes=6),  # type: ignore[arg-type]
        controller_name=CONTROLLER, origin=ORIGIN, front_proxy=lambda: PROXY,
    )  # fmt: skip
    return api, manager, client, worker


def request(
    path: str, user: str = "alice", cn: str | None = "front-proxy-client", **params: str
) -> HttpRequest:
    """A request as the front proxy forwards it (``cn``: its verified certificate's)."""
    lines = (("x-remote-user", user), ("x-remote-group", "devs"),
             ("authorization", "Bearer never-read"))  # fmt: skip
    return HttpRequest("GET", path, dict(params), dict(lines), cn, lines)


LOGS = f"{API_PATH}/namespaces/team-a/jobs/train/log"
MIRROR = f"{API_PATH}/namespaces/team-a/jobs/train/mirror"
NS = f"{API_PATH}/namespaces"


async def body(answer: Answer | Stream) -> bytes:
    if isinstance(answer, Answer):
        return answer.body
    try:
        return b"".join([chunk async for chunk in answer.chunks])
    finally:
        answer.done()


def refusal(answer: Answer | Stream) -> tuple[int, str]:
    assert isinstance(answer, Answer)
    status = json.loads(answer.body)
    assert status["kind"] == "Status" and status["code"] == answer.code
    return answer.code, status["reason"]


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        # Straight to the port: no front-proxy certificate, whatever the headers say.
        (request(LOGS, cn=None), (401, "Unauthorized")),
        (request(API_PATH, cn=None), (401, "Unauthorized")),
        # A certificate of the front proxy's CA, but not an allowed name: forged headers.
        (request(LOGS, cn="intruder"), (401, "Unauthorized")),
        (request(LOGS, user="bob"), (403, "Forbidden")),
        (request(f"{NS}/team-b/jobs/train/log"), (403, "Forbidden")),
        (request(f"{NS}/team-a/jobs/nope/log"), (404, "NotFound")),
        (request(f"{NS}/team-a/jobs/waiting/log"), (404, "NotPlaced")),
        (request(LOGS, index="7"), (404, "NoPods")),
        (request(LOGS, tailLines="-3"), (400, "BadRequest")),
        (request(LOGS, kind="RayJob"), (400, "BadRequest")),
        (request(f"{NS}/team-a/rayjobs/train/log"), (404, "NotFound")),
        (request(f"{NS}/team-a/jobs/train/exec"), (404, "NotFound")),
        (request("/v1/namespaces/team-a/jobs/train/logs"), (404, "NotFound")),
    ],
)  # fmt: skip
async def test_refusals(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
    req: HttpRequest,
    expected: tuple[int, str],
) -> None:
    api, *_ = setup
    assert refusal(await api.handle(req)) == expected


_FAILED_AT = "2026-01-01T00:01:00Z"
_FAILED = {"conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": _FAILED_AT}]}


async def test_a_finished_workloads_kept_mirror_is_read(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, _, worker = setup
    key = ("Job.v1.batch", "team-a/train")
    worker.mirrors[key] = {**worker.mirrors[key], "status": _FAILED}
    api._kinds["Job.v1.batch"].objects["team-a/train"] = {  # type: ignore[attr-defined]
        **_job("train", "worker-a"),
        "status": _FAILED,
    }
    answer = await api.handle(request(LOGS))
    assert (await body(answer)).startswith(b"one\nmo")  # its newest pod, as any log


async def test_a_finished_workload_whose_mirror_went_says_when_and_which_setting(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, _, worker = setup
    worker.mirrors.clear()  # the relay deleted it at its finish + the ttl
    api._kinds["Job.v1.batch"].objects["team-a/train"] = {  # type: ignore[attr-defined]
        **_job("train", "worker-a"),
        "status": _FAILED,
    }
    answer = await api.handle(request(LOGS))
    assert refusal(answer) == (404, "PodsRemoved")
    message = json.loads(answer.body)["message"]  # type: ignore[union-attr]
    assert message == (
        "Job team-a/train finished at 2026-01-01T00:01:00Z; its pods were removed at "
        "2026-01-01T01:01:00Z (--finished-mirror-ttl 1h; set it longer to keep logs longer)"
    )
    assert "waits for a worker" not in message


async def test_the_forwarded_user_is_authorised_by_one_subject_access_review(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, manager, _, _ = setup
    answer = await api.handle(request(LOGS))
    assert await body(answer) == b"one\nmo" + answer_cut()
    (review,) = manager.reviews
    assert review["kind"] == "SubjectAccessReview"
    assert (review["spec"]["user"], review["spec"]["groups"]) == ("alice", ["devs"])


async def test_discovery_needs_the_front_proxy_only(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, manager, _, _ = setup
    answer = await api.handle(request(API_PATH, user="system:kube-aggregator"))
    assert isinstance(answer, Answer) and answer.code == 200
    names = [r["name"] for r in json.loads(answer.body)["resources"]]
    assert names == ["jobs/log", "jobs/mirror", "pendingworkloads"]
    for path in ("/apis", "/apis/api.jobrelay.dev"):
        found = await api.handle(request(path))
        assert isinstance(found, Answer) and found.code == 200
    assert manager.reviews == []


async def test_limit_bytes_is_passed_on_and_caps_the_answer(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, client, _ = setup
    api.limits = Limits(max_bytes=10_000)
    assert await body(await api.handle(request(LOGS, limitBytes="3"))) == b"one" + answer_cut()
    assert client.asked[-1] == ("train-1-bbb", {"limitBytes": "3"})


def answer_cut() -> bytes:
    from jobrelay.relayapi.logstreams import TRUNCATED

    return TRUNCATED


async def test_logs_of_the_newest_pod_capped(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, manager, client, _ = setup
    answer = await api.handle(request(LOGS, tailLines="2", timestamps="true"))
    assert isinstance(answer, Stream)
    assert await body(answer) == b"one\nmo" + answer_cut()
    assert client.asked == [("train-1-bbb", {"tailLines": "2", "timestamps": "true"})]
    spec = manager.reviews[-1]["spec"]
    assert spec["user"] == "alice" and spec["groups"] == ["devs"]
    assert spec["resourceAttributes"]["subresource"] == "log"


async def test_index_picks_its_pod(setup: tuple[RelayApi, Manager, WorkerClient, Worker]) -> None:
    api, _, client, _ = setup
    assert await body(await api.handle(request(LOGS, index="0"))) == b"zero\n"
    assert client.asked[-1][0] == "train-0-aaa"


async def test_all_pods_are_prefixed(setup: tuple[RelayApi, Manager, WorkerClient, Worker]) -> None:
    api, _, _, _ = setup
    api.limits = Limits(max_bytes=10_000)
    text = await body(await api.handle(request(LOGS, allPods="true")))
    assert text == b"[pod/train-0-aaa] zero\n[pod/train-1-bbb] one\n[pod/train-1-bbb] more\n"


async def test_a_worker_refusal_is_told_without_addresses(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, client, _ = setup
    api.limits = Limits(max_bytes=10_000)
    del client.logs["train-1-bbb"]
    text = await body(await api.handle(request(LOGS)))
    assert b"is waiting" in text and b"127.0.0.1" not in text


async def test_streams_per_user_are_bounded(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, client, _ = setup
    client.hold = asyncio.Event()
    first = await api.handle(request(LOGS, follow="true"))
    assert isinstance(first, Stream)
    assert refusal(await api.handle(request(LOGS, follow="true"))) == (429, "TooManyRequests")
    client.hold.set()
    await body(first)  # its end frees the slot
    assert isinstance(await api.handle(request(LOGS)), Stream)


async def test_a_follow_is_not_capped(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, _, _ = setup
    assert await body(await api.handle(request(LOGS, follow="true"))) == b"one\nmore\n"


async def test_mirror_view(setup: tuple[RelayApi, Manager, WorkerClient, Worker]) -> None:
    api, manager, _, _ = setup
    answer = await api.handle(request(MIRROR))
    assert isinstance(answer, Answer) and answer.code == 200
    view = json.loads(answer.body)
    assert view["cluster"] == "worker-a"
    assert view["mirror"]["status"] == {"active": 2}
    assert [p["name"] for p in view["pods"]] == ["train-0-aaa", "train-1-bbb"]
    assert view["pods"][0]["node"] == "kwok-node-0"
    for secret in ("10.9.8.7", "10.0.0.5", "10.0.0.1"):
        assert secret not in answer.body.decode()
    attributes = manager.reviews[-1]["spec"]["resourceAttributes"]
    assert attributes == {"namespace": "team-a", "verb": "get", "group": "batch",
                          "resource": "jobs", "name": "train"}  # fmt: skip


async def test_mirror_view_needs_get_on_the_workload(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, manager, _, _ = setup
    manager.allowed.discard(("alice", "team-a", "jobs", ""))
    assert refusal(await api.handle(request(MIRROR))) == (403, "Forbidden")


async def test_a_disconnected_worker(setup: tuple[RelayApi, Manager, WorkerClient, Worker]) -> None:
    api, _, _, worker = setup
    worker.connected = False
    code, reason = refusal(await api.handle(request(LOGS)))
    assert (code, reason) == (503, "WorkerUnavailable")


async def test_a_follow_ends_soon_after_its_pod() -> None:
    """A simulated kubelet never ends a follow: the pod's end does, after a short grace."""
    from jobrelay.relayapi.logstreams import until_ended

    pod_ended = asyncio.Event()
    forever = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        yield b"running\n"
        await forever.wait()

    async def ended() -> None:
        await pod_ended.wait()

    stream = until_ended(chunks(), ended(), grace=0.05)
    assert await anext(stream) == b"running\n"
    pod_ended.set()
    rest = [chunk async for chunk in stream]
    assert rest == []


async def test_a_follow_passes_on_what_comes_before_its_pod_ends() -> None:
    from jobrelay.relayapi.logstreams import until_ended

    feed: asyncio.Queue[bytes] = asyncio.Queue()

    async def chunks() -> AsyncIterator[bytes]:
        while True:
            yield await feed.get()

    never = asyncio.Event()
    stream = until_ended(chunks(), never.wait(), grace=0.05)
    for line in (b"a\n", b"b\n"):
        feed.put_nowait(line)
        assert await anext(stream) == line
    await stream.aclose()


async def test_a_broken_or_idle_follow_raises_to_its_reader() -> None:
    """The idle time-out (a read time-out of the worker's stream) reaches _pod_log, which
    tells the user why the follow stopped."""
    import httpx2

    from jobrelay.relayapi.logstreams import until_ended

    async def chunks() -> AsyncIterator[bytes]:
        yield b"last words\n"
        raise httpx2.ReadTimeout("idle")

    never = asyncio.Event()
    stream = until_ended(chunks(), never.wait(), grace=0.05)
    assert await anext(stream) == b"last words\n"
    with pytest.raises(httpx2.ReadTimeout):
        await anext(stream)


# -- issue 21: the mirror from jobrelay's own state, pods by UID, bounded streams ----------


async def test_the_mirror_comes_from_jobrelays_caches_not_the_annotation(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    """A user who may edit the Job points jobrelay.dev/cluster at another worker, where a
    namesake (someone else's Job of the same name) runs: it is never read."""
    api, _, _, _ = setup
    pool: Pool = api._pool  # type: ignore[assignment]
    train = api._kinds["Job.v1.batch"].objects.get("team-a/train")
    assert train is not None
    train["metadata"]["annotations"]["jobrelay.dev/cluster"] = "worker-b"
    other = WorkerClient(
        pods=[_pod("train-0-zzz", "2026-01-01T00:00:09Z", owner="namesake-uid")],
        logs={"train-0-zzz": [b"someone else's secrets\n"]},
    )
    namesake = {"metadata": {"name": "train", "namespace": "team-a", "uid": "namesake-uid",
                             "labels": {}}}  # fmt: skip
    pool.by_name["worker-b"] = Worker(other, name="worker-b", mirrors={
        ("Job.v1.batch", "team-a/train"): namesake,
    })  # fmt: skip
    api.limits = Limits(max_bytes=10_000)
    assert await body(await api.handle(request(LOGS))) == b"one\nmore\n"
    assert other.asked == [] and other.lists == []
    view = json.loads(await body(await api.handle(request(MIRROR))))
    assert view["cluster"] == "worker-a"
    assert view["mirror"]["metadata"]["uid"] == MIRROR_UID


async def test_a_namesakes_pods_on_the_worker_are_not_read(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    """Pods of another Job called train on the same worker (another controller, a user
    of the worker), even labelled like the mirror's, are not the mirror's."""
    api, _, client, _ = setup
    forged = _pod("train-9-evil", "2026-01-01T00:00:09Z", owner="other-uid")
    forged["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = MIRROR_UID
    client.pods.append(forged)
    client.logs["train-9-evil"] = [b"not yours\n"]
    api.limits = Limits(max_bytes=10_000)
    text = await body(await api.handle(request(LOGS, allPods="true")))
    assert b"not yours" not in text and b"train-9-evil" not in text
    assert client.lists[-1]["label_selector"] == f"batch.kubernetes.io/controller-uid={MIRROR_UID}"
    # The newest pod is the mirror's newest, not the namesake's.
    assert await body(await api.handle(request(LOGS))) == b"one\nmore\n"
    view = json.loads(await body(await api.handle(request(MIRROR))))
    assert [p["name"] for p in view["pods"]] == ["train-0-aaa", "train-1-bbb"]


async def test_a_follow_of_every_pod_holds_one_watch_and_counts_each_pod(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, _, client, _ = setup
    api.limits = Limits(max_streams_per_user=4)
    api.streams.per_user = 4
    client.hold = asyncio.Event()
    answer = await api.handle(request(LOGS, allPods="true", follow="true"))
    assert isinstance(answer, Stream)
    got = b""
    while got.count(b"\n") < 3:
        got += await anext(answer.chunks)
    assert client.watches == 1  # one watch of the mirror's pods, not one per pod
    # Two pods and the watch: 3 of alice's 4; another such follow is refused, saying why.
    assert api.streams.open(user="alice") == 3
    refused = await api.handle(request(LOGS, allPods="true", follow="true"))
    assert refusal(refused) == (429, "TooManyRequests")
    assert isinstance(refused, Answer)
    assert "at most 4 log streams per user" in json.loads(refused.body)["message"]
    # The client goes away (the server closes the chunks, then calls done): all released.
    await answer.chunks.aclose()  # type: ignore[attr-defined]
    answer.done()
    assert api.streams.open() == 0
    assert isinstance(await api.handle(request(LOGS, allPods="true", follow="true")), Stream)


async def test_a_follow_is_bounded_in_bytes(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    from jobrelay.relayapi.logstreams import FOLLOW_CUT

    api, _, _, _ = setup
    api.limits = Limits(max_follow_bytes=5)
    assert await body(await api.handle(request(LOGS, follow="true"))) == b"one\nm" + FOLLOW_CUT


async def test_a_follow_is_bounded_in_rate() -> None:
    from jobrelay.relayapi.logstreams import bounded_follow
    from jobrelay.relayapi.stream_rules import MAX_LINE_BYTES

    async def fast() -> AsyncIterator[bytes]:
        for _ in range(6):
            yield b"x" * (MAX_LINE_BYTES // 2)

    loop = asyncio.get_running_loop()
    started = loop.time()
    # The burst (64 KiB) passes at once, the other 128 KiB at 64 KiB/s: 2 s (loop time).
    got = [chunk async for chunk in bounded_follow(fast(), 10**9, MAX_LINE_BYTES)]
    assert sum(map(len, got)) == 3 * MAX_LINE_BYTES
    assert loop.time() - started == pytest.approx(2.0, abs=0.1)


async def test_an_endless_line_is_passed_on_in_bounded_pieces() -> None:
    """A pod printing one line without end: the old prefixed held all of it (and copied it
    whole per chunk) until the stream ended."""
    from jobrelay.relayapi.logstreams import prefixed
    from jobrelay.relayapi.stream_rules import CONTINUED, MAX_LINE_BYTES

    fed = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal fed
        for _ in range(512):  # 2 MiB in 4 KiB chunks, no newline
            fed += 4096
            yield b"y" * 4096

    pieces = prefixed(b"[pod/p] ", endless())
    first = await anext(pieces)
    assert fed <= MAX_LINE_BYTES + 4096  # passed on long before the end
    assert first == b"[pod/p] " + b"y" * MAX_LINE_BYTES + CONTINUED
    rest = [piece async for piece in pieces]
    assert all(len(piece) <= MAX_LINE_BYTES + 4096 + len(CONTINUED) + 8 for piece in rest)


async def test_merged_follows_end_when_their_reader_goes_away_with_a_full_queue() -> None:
    """Found by the e2e test: with more pods than the queue holds, every pump waited on a
    full queue; cancelled, each waited again to mark its end, so the closing never ended and
    a client that went away held all its worker streams."""
    from jobrelay.relayapi.logstreams import merged

    closed = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal closed
        try:
            while True:
                yield b"line\n"
        finally:
            closed += 1

    stream = merged([endless() for _ in range(40)])
    assert await anext(stream) == b"line\n"
    await asyncio.sleep(0.01)  # every pump blocks on the full queue
    async with asyncio.timeout(5):
        await stream.aclose()  # type: ignore[attr-defined]
    assert closed == 40


# -- issue 32: the followed mirror is the recorded one; every kind's pods by UID ------------


async def test_a_forged_later_run_on_another_worker_is_never_read(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    """A worker that shows an object with our marks, this Job's UID and a higher run is
    not thereby its mirror: the one whose UID is recorded is read."""
    api, _, _, _ = setup
    pool: Pool = api._pool  # type: ignore[assignment]
    train = api._kinds["Job.v1.batch"].objects.get("team-a/train")
    assert train is not None
    hostile = WorkerClient(
        pods=[_pod("train-0-evil", "2026-01-01T00:00:09Z", owner="forged-uid")],
        logs={"train-0-evil": [b"forged\n"]},
    )
    pool.by_name["worker-b"] = Worker(hostile, name="worker-b", mirrors={
        ("Job.v1.batch", "team-a/train"): mirror_of(train, "forged-uid", run=9),
    })  # fmt: skip
    api.limits = Limits(max_bytes=10_000)
    assert await body(await api.handle(request(LOGS))) == b"one\nmore\n"
    view = json.loads(await body(await api.handle(request(MIRROR))))
    assert (view["cluster"], view["mirror"]["metadata"]["uid"]) == ("worker-a", MIRROR_UID)
    assert hostile.lists == [] and hostile.asked == []


def _owned_pod(name: str, created: str, owner: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "creationTimestamp": created, "labels": labels,
            "ownerReferences": [{"name": "x", "uid": owner, "controller": True}],
        },
        "spec": {"nodeName": "kwok-node-0", "containers": [{"name": "main"}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


def _made(name: str, uid: str, controller: str) -> dict[str, Any]:
    """An object a kind's operator made, controlled by ``controller`` (a UID)."""
    return {"metadata": {"name": name, "namespace": "team-a", "uid": uid, "ownerReferences": [
        {"name": "train", "uid": controller, "controller": True}]}}  # fmt: skip


def _add_kind(
    api: RelayApi, worker: Worker, kind: Any, status: dict[str, Any] | None = None
) -> None:
    obj = _job("train", "worker-a", mirror_uid="m-" + kind.ref.plural)
    objects = Objects({"team-a/train": obj})
    api._kinds[kind.name] = Runtime(kind, objects)  # type: ignore[index]
    mirror = mirror_of(obj, "m-" + kind.ref.plural)
    mirror["status"] = status or {}
    worker.mirrors[(kind.name, "team-a/train")] = mirror


async def test_a_rayjobs_pods_are_its_clusters_and_its_submitters(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    """KubeRay makes a RayCluster (named in the RayJob's status) and a submitter Job, both
    controlled by the RayJob: their pods are the mirror's; a RayCluster of that name the
    mirror does not control is someone else's, and so are its pods."""
    api, manager, client, worker = setup
    manager.allowed.add(("alice", "team-a", "rayjobs", ""))
    _add_kind(api, worker, RayJobKind(), {"rayClusterName": "train-x1"})
    client.objects[("rayclusters", "train-x1")] = _made("train-x1", "rc-uid", "m-rayjobs")
    client.objects[("jobs", "train")] = _made("train", "submit-uid", "m-rayjobs")
    client.pods = [
        _owned_pod("train-x1-head", "2026-01-01T00:00:01Z", "rc-uid",
                   **{"ray.io/cluster": "train-x1"}),
        _owned_pod("train-x1-workers-worker-a", "2026-01-01T00:00:02Z", "rc-uid",
                   **{"ray.io/cluster": "train-x1"}),
        _owned_pod("train-sub", "2026-01-01T00:00:03Z", "submit-uid",
                   **{"batch.kubernetes.io/job-name": "train"}),
        # Labelled like the cluster's, controlled by something else.
        _owned_pod("train-x1-evil", "2026-01-01T00:00:09Z", "evil",
                   **{"ray.io/cluster": "train-x1"}),
    ]  # fmt: skip
    client.logs = {pod["metadata"]["name"]: [b"line\n"] for pod in client.pods}
    api.limits = Limits(max_bytes=10_000)
    path = f"{API_PATH}/namespaces/team-a/rayjobs/train"
    view = json.loads(await body(await api.handle(request(f"{path}/mirror"))))
    assert [p["name"] for p in view["pods"]] == [
        "train-x1-head", "train-x1-workers-worker-a", "train-sub"
    ]  # fmt: skip
    newest = await api.handle(request(f"{path}/log"))
    assert isinstance(newest, Stream) and dict(newest.headers)["jobrelay-pods"] == "train-sub"
    await body(newest)
    # The RayCluster named in the status is a namesake the mirror does not control.
    client.objects[("rayclusters", "train-x1")] = _made("train-x1", "rc-uid", "someone-else")
    view = json.loads(await body(await api.handle(request(f"{path}/mirror"))))
    assert [p["name"] for p in view["pods"]] == ["train-sub"]


async def test_a_pytorchjobs_pods_are_those_it_controls(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    api, manager, client, worker = setup
    manager.allowed.add(("alice", "team-a", "pytorchjobs", ""))
    _add_kind(api, worker, PyTorchJobKind())
    name = "training.kubeflow.org/job-name"
    index = "training.kubeflow.org/replica-index"
    client.pods = [
        _owned_pod("train-master-0", "2026-01-01T00:00:01Z", "m-pytorchjobs",
                   **{name: "train", index: "0"}),
        _owned_pod("train-worker-0", "2026-01-01T00:00:02Z", "m-pytorchjobs",
                   **{name: "train", index: "0"}),
        _owned_pod("train-worker-1", "2026-01-01T00:00:03Z", "m-pytorchjobs",
                   **{name: "train", index: "1"}),
        _owned_pod("train-worker-9", "2026-01-01T00:00:09Z", "namesake",
                   **{name: "train", index: "1"}),
    ]  # fmt: skip
    client.logs = {pod["metadata"]["name"]: [b"line\n"] for pod in client.pods}
    api.limits = Limits(max_bytes=10_000)
    path = f"{API_PATH}/namespaces/team-a/pytorchjobs/train"
    view = json.loads(await body(await api.handle(request(f"{path}/mirror"))))
    assert [p["name"] for p in view["pods"]] == [
        "train-master-0",
        "train-worker-0",
        "train-worker-1",
    ]
    assert client.lists[-1]["label_selector"] == f"{name}=train"
    one = await api.handle(request(f"{path}/log", index="1"))
    assert isinstance(one, Stream) and dict(one.headers)["jobrelay-pods"] == "train-worker-1"
    assert await body(one) == b"line\n"


async def test_a_follow_of_a_rayjobs_pods_watches_them_by_each_selector(
    setup: tuple[RelayApi, Manager, WorkerClient, Worker],
) -> None:
    """A RayJob's pods are listed by two selectors (its cluster's, its submitter's): a
    follow of all of them watches each set by its own, and counts both watches."""
    api, _, client, worker = setup
    _add_kind(api, worker, RayJobKind(), {"rayClusterName": "train-x1"})
    client.objects[("rayclusters", "train-x1")] = _made("train-x1", "rc-uid", "m-rayjobs")
    client.objects[("jobs", "train")] = _made("train", "submit-uid", "m-rayjobs")
    client.pods = [
        _owned_pod("train-x1-head", "2026-01-01T00:00:01Z", "rc-uid",
                   **{"ray.io/cluster": "train-x1"}),
        _owned_pod("train-sub", "2026-01-01T00:00:03Z", "submit-uid",
                   **{"batch.kubernetes.io/job-name": "train"}),
    ]  # fmt: skip
    client.logs = {pod["metadata"]["name"]: [b"line\n"] for pod in client.pods}
    client.hold = asyncio.Event()
    api.limits = Limits(max_streams_per_user=10)
    api.streams.per_user = 10
    path = f"{API_PATH}/namespaces/team-a/rayjobs/train/log"
    answer = await api.handle(request(path, allPods="true", follow="true"))
    assert isinstance(answer, Stream)
    got = b""
    while got.count(b"\n") < 2:
        got += await anext(answer.chunks)
    assert sorted(got.splitlines()) == [b"[pod/train-sub] line", b"[pod/train-x1-head] line"]
    assert client.watches == 2
    assert api.streams.open(user="alice") == 4  # two pods, two watches
    await answer.chunks.aclose()  # type: ignore[attr-defined]
    answer.done()
    assert api.streams.open() == 0


async def test_the_managed_by_webhook_answers_the_apiserver_without_a_front_proxy() -> None:
    """The manager's apiserver sends no client certificate to a webhook: the review is
    answered all the same (it reads nothing, it only computes a patch)."""
    default = ManagedByDefault("batch", "v1", "jobs", ("spec", "managedBy"), CONTROLLER)
    api = RelayApi(
        Manager(), Pool(), {}, Limits(), controller_name=CONTROLLER, origin=ORIGIN,  # type: ignore[arg-type]
        front_proxy=lambda: None, defaults=[default],
    )  # fmt: skip
    review = {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "object": {"spec": {}},
                    "resource": {"group": "batch", "version": "v1", "resource": "jobs"}},
    }  # fmt: skip
    posted = HttpRequest("POST", WEBHOOK_PATH, {}, {}, None, (), json.dumps(review).encode())
    answer = await api.handle(posted)
    assert isinstance(answer, Answer) and answer.code == 200
    response = json.loads(answer.body)["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/spec/managedBy", "value": CONTROLLER}]
    assert refusal(await api.handle(HttpRequest("GET", WEBHOOK_PATH, {}, {}, None))) == (
        405, "MethodNotAllowed",
    )  # fmt: skip
    bad = await api.handle(HttpRequest("POST", WEBHOOK_PATH, {}, {}, None, (), b"{"))
    assert refusal(bad) == (400, "BadRequest")
