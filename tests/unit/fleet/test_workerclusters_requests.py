"""The requests behind registering workers: the CRD, the namespace, the origin, the
WorkerCluster and its Secret, against a scripted manager."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.fleet import origin_record, workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workerclusters.jobrelay.dev"
WORKERS_PATH = "/apis/jobrelay.dev/v1alpha1/workerclusters"

Answer = tuple[int, dict[str, Any]]


def refusal(code: int, reason: str) -> Answer:
    return code, {"kind": "Status", "status": "Failure", "code": code, "reason": reason,
                  "message": reason}  # fmt: skip


class Manager:
    """Answers each (method, path) from ``answers`` (a list is used up in order)."""

    def __init__(self, answers: dict[tuple[str, str], Answer | list[Answer]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        key = (request.method, request.url.path)
        body = msgspec.json.decode(request.content) if request.content else None
        self.asked.append((*key, body))
        answer = self.answers.get(key, refusal(404, "NotFound"))
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        code, content = answer
        return httpx2.Response(code, content=msgspec.json.encode(content))


@pytest.fixture
async def connect() -> AsyncIterator[Callable[[Manager], ApiClient]]:
    clients: list[ApiClient] = []

    def make(manager: Manager) -> ApiClient:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(manager), base_url="https://m")
        clients.append(ApiClient(http, cluster="manager"))
        return clients[-1]

    yield make
    for client in clients:
        await client.aclose()


async def test_the_crd_is_applied_then_awaited_until_established(
    connect: Callable[[Manager], ApiClient],
) -> None:
    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    manager = Manager(
        {("PATCH", CRD_PATH): (200, {}), ("GET", CRD_PATH): [(200, {}), (200, established)]}
    )
    await workerclusters.install_crd(connect(manager))
    assert [(m, p) for m, p, _ in manager.asked] == [
        ("PATCH", CRD_PATH), ("GET", CRD_PATH), ("GET", CRD_PATH),
    ]  # fmt: skip


async def test_a_crd_never_established_is_an_error(
    connect: Callable[[Manager], ApiClient],
) -> None:
    manager = Manager({("PATCH", CRD_PATH): (200, {}), ("GET", CRD_PATH): (200, {})})
    with pytest.raises(workerclusters.RegistryError, match="not established within 0s"):
        await workerclusters.install_crd(connect(manager), timeout=0.0)


@pytest.mark.parametrize(
    ("get", "create", "created"),
    [
        ((200, {}), None, False),  # there: nothing else asked
        (refusal(404, "NotFound"), (201, {}), True),
        (refusal(403, "Forbidden"), refusal(409, "AlreadyExists"), True),  # may create, not read
    ],
)
async def test_the_namespace_is_created_unless_it_exists(
    connect: Callable[[Manager], ApiClient], get: Answer, create: Answer | None, created: bool
) -> None:
    answers: dict[tuple[str, str], Answer | list[Answer]] = {("GET", "/api/v1/namespaces/ns"): get}
    if create is not None:
        answers[("POST", "/api/v1/namespaces")] = create
    manager = Manager(answers)
    await workerclusters.ensure_namespace(connect(manager), "ns")
    assert (("POST", "/api/v1/namespaces") in [(m, p) for m, p, _ in manager.asked]) is created


@pytest.mark.parametrize(
    ("get", "create"),
    [
        (refusal(500, "InternalError"), None),
        (refusal(404, "NotFound"), refusal(403, "Forbidden")),
    ],
)
async def test_a_namespace_that_cannot_be_made_is_an_error(
    connect: Callable[[Manager], ApiClient], get: Answer, create: Answer | None
) -> None:
    answers: dict[tuple[str, str], Answer | list[Answer]] = {("GET", "/api/v1/namespaces/ns"): get}
    if create is not None:
        answers[("POST", "/api/v1/namespaces")] = create
    with pytest.raises(ApiError):
        await workerclusters.ensure_namespace(connect(Manager(answers)), "ns")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ((200, {"metadata": {"uid": "u-1"}}), "u-1"),
        ((200, {"metadata": {}}), "has no UID"),
        (refusal(403, "Forbidden"), "cannot read namespace kube-system"),
    ],
)
async def test_the_default_origin_is_the_kube_system_uid(
    connect: Callable[[Manager], ApiClient], answer: Answer, expected: str
) -> None:
    client = connect(Manager({("GET", "/api/v1/namespaces/kube-system"): answer}))
    if expected.startswith("u-"):
        assert await workerclusters.default_origin(client) == expected
        return
    with pytest.raises(workerclusters.RegistryError, match=expected):
        await workerclusters.default_origin(client)


async def test_register_applies_the_secret_then_the_worker_and_unregister_deletes_both(
    connect: Callable[[Manager], ApiClient],
) -> None:
    secret_path = "/api/v1/namespaces/ns/secrets/worker-w1-kubeconfig"
    manager = Manager(
        {
            ("GET", "/api/v1/namespaces/ns"): (200, {}),
            ("PATCH", secret_path): (200, {}),
            ("PATCH", f"{WORKERS_PATH}/w1"): (200, {}),
            ("DELETE", f"{WORKERS_PATH}/w1"): (200, {}),
            ("DELETE", secret_path): refusal(404, "NotFound"),
        }
    )
    client = connect(manager)
    kubeconfig = {"apiVersion": "v1", "kind": "Config"}
    await workerclusters.register(
        client, "w1", kubeconfig, context="c", labels={"zone": "a"}, namespace="ns"
    )
    patches = {path: body for method, path, body in manager.asked if method == "PATCH"}
    assert patches[secret_path]["stringData"][workerclusters.SECRET_KEY].startswith("apiVersion")
    worker = patches[f"{WORKERS_PATH}/w1"]
    assert worker["spec"] == {
        "kubeconfigSecretRef": {"name": "worker-w1-kubeconfig", "key": workerclusters.SECRET_KEY},
        "context": "c",
    }
    assert worker["metadata"]["labels"] == {"zone": "a"}
    assert await workerclusters.unregister(client, "w1", namespace="ns")  # its Secret was gone
    assert not await workerclusters.unregister(client, "w2", namespace="ns")


async def test_listing_workers_without_the_crd_says_to_install_it(
    connect: Callable[[Manager], ApiClient],
) -> None:
    listed = {"items": [{"metadata": {"name": "w1"}}], "metadata": {"resourceVersion": "1"}}
    workers = await workerclusters.list_workers(
        connect(Manager({("GET", WORKERS_PATH): (200, listed)}))
    )
    assert [worker["metadata"]["name"] for worker in workers] == ["w1"]
    with pytest.raises(workerclusters.RegistryError, match=r"files/crds/`$"):
        await workerclusters.list_workers(connect(Manager({})))
    with pytest.raises(ApiError):
        await workerclusters.list_workers(
            connect(Manager({("GET", WORKERS_PATH): refusal(500, "InternalError")}))
        )


RECORD_PATH = "/api/v1/namespaces/ns/configmaps/jobrelay-relay-origin"
RECORDS_PATH = "/api/v1/namespaces/ns/configmaps"


@pytest.mark.parametrize(
    ("explicit", "answers", "origin", "writes"),
    [
        # First start: nothing recorded, kube-system read, the record created.
        ("", {}, "ks-uid", [("POST", RECORDS_PATH)]),
        # Restored or restarted: the record wins over a kube-system of another UID.
        ("", {("GET", RECORD_PATH): (200, {"data": {"origin": "old-uid"}})}, "old-uid", []),
        # --origin: recorded when absent, the record replaced when it differs.
        ("hq", {}, "hq", [("POST", RECORDS_PATH)]),
        ("hq", {("GET", RECORD_PATH): (200, {"data": {"origin": "hq"}})}, "hq", []),
        ("hq", {("GET", RECORD_PATH): (200, {"data": {"origin": "old"}})}, "hq",
         [("PATCH", RECORD_PATH)]),
        # Another replica recorded first: its record is used.
        ("", {("GET", RECORD_PATH): [refusal(404, "NotFound"), (200, {"data": {"origin": "won"}})],
              ("POST", RECORDS_PATH): refusal(409, "AlreadyExists")}, "won",
         [("POST", RECORDS_PATH)]),
    ],
)  # fmt: skip
async def test_the_origin_is_settled_once_and_recorded(
    connect: Callable[[Manager], ApiClient],
    explicit: str,
    answers: dict[tuple[str, str], Answer | list[Answer]],
    origin: str,
    writes: list[tuple[str, str]],
) -> None:
    answers = {
        ("GET", "/api/v1/namespaces/kube-system"): (200, {"metadata": {"uid": "ks-uid"}}),
        ("POST", RECORDS_PATH): (201, {}),
        ("PATCH", RECORD_PATH): (200, {}),
        **answers,
    }
    manager = Manager(answers)
    client = connect(manager)
    assert await origin_record.settle_origin(client, "ns", "jobrelay.dev/relay", explicit) == origin
    assert [(m, p) for m, p, _ in manager.asked if m != "GET"] == writes
    for method, _, body in manager.asked:
        if method == "POST":
            assert body["data"] == {"origin": origin if origin != "won" else "ks-uid"}


async def test_an_unreadable_record_or_a_refused_write_names_the_fix(
    connect: Callable[[Manager], ApiClient],
) -> None:
    forbidden = connect(Manager({("GET", RECORD_PATH): refusal(403, "Forbidden")}))
    with pytest.raises(workerclusters.RegistryError, match="grant `get`"):
        await origin_record.settle_origin(forbidden, "ns", "jobrelay.dev/relay", "hq")
    refused = connect(Manager({("POST", RECORDS_PATH): refusal(403, "Forbidden")}))
    with pytest.raises(workerclusters.RegistryError, match="grant `create`"):
        await origin_record.settle_origin(refused, "ns", "jobrelay.dev/relay", "hq")
    # The CLI: the record, else (no controller started yet) kube-system's UID.
    recorded = connect(Manager({("GET", RECORD_PATH): (200, {"data": {"origin": "r"}})}))
    assert await origin_record.manager_origin(recorded, "ns", "jobrelay.dev/relay") == "r"
    fresh = connect(
        Manager({("GET", "/api/v1/namespaces/kube-system"): (200, {"metadata": {"uid": "k"}})})
    )
    assert await origin_record.manager_origin(fresh, "ns", "jobrelay.dev/relay") == "k"


async def test_check_crds_asks_discovery_and_names_the_first_missing_crd_in_one_line(
    connect: Callable[[Manager], ApiClient],
) -> None:
    group = "/apis/jobrelay.dev/v1alpha1"
    both = {"resources": [{"name": "workerclusters"}, {"name": "relayqueues"}]}
    await workerclusters.check_crds(connect(Manager({("GET", group): (200, both)})))
    only_workers = {"resources": [{"name": "workerclusters"}]}
    for answers, missing in (
        ({}, "WorkerCluster CRD (workerclusters.jobrelay.dev)"),
        ({("GET", group): (200, only_workers)}, "RelayQueue CRD (relayqueues.jobrelay.dev)"),
    ):
        manager = Manager(answers)
        with pytest.raises(workerclusters.RegistryError) as refused:
            await workerclusters.check_crds(connect(manager))
        message = str(refused.value)
        assert missing in message and "\n" not in message
        assert "crds.install" in message
        assert "`kubectl apply --server-side -f charts/jobrelay/files/crds/`" in message
        assert all(method == "GET" for method, _, _ in manager.asked), "never writes a CRD"
