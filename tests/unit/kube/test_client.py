"""ApiClient over a mock transport: URLs, bodies, errors, pagination, counting."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError, ResponseTooLarge, WriteFenced
from jobrelay.kube.requesting import RequestRecord
from jobrelay.kube.resources import JOBS, NODES, WORKER_CLUSTERS
from jobrelay.vocabulary.resource import Resource

Handler = Callable[[httpx2.Request], httpx2.Response]


def json_response(status: int, body: Any) -> httpx2.Response:
    return httpx2.Response(status, content=msgspec.json.encode(body))


def status(code: int, reason: str, message: str = "nope") -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "code": code,
        "reason": reason,
        "message": message,
        "status": "Failure",
    }


@contextlib.asynccontextmanager
async def api(
    handler: Handler, on_request: Callable[[RequestRecord], None] | None = None
) -> AsyncIterator[tuple[ApiClient, list[httpx2.Request]]]:
    seen: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return handler(request)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(record), base_url="https://api")
    async with ApiClient(http, cluster="c1", on_request=on_request) as client:
        yield client, seen


def body_of(request: httpx2.Request) -> Any:
    return msgspec.json.decode(request.content)


def echo(request: httpx2.Request) -> httpx2.Response:
    body = body_of(request) if request.content else {"ok": True}
    return json_response(200, body if isinstance(body, dict) else {"patch": body})


# -- URLs ---------------------------------------------------------------------------------


async def test_urls_for_core_group_namespaced_and_cluster_scoped_kinds() -> None:
    async with api(echo) as (client, seen):
        await client.get(JOBS, "j1", namespace="team-a")
        await client.get(NODES, "n1")
        await client.get(WORKER_CLUSTERS, "w1")
        await client.get(Resource("", "v1", "pods", "Pod", True), "p:1", namespace="ns")
    assert [r.url.path for r in seen] == [
        "/apis/batch/v1/namespaces/team-a/jobs/j1",
        "/api/v1/nodes/n1",
        "/apis/jobrelay.dev/v1alpha1/workerclusters/w1",
        "/api/v1/namespaces/ns/pods/p:1",
    ]


async def test_scope_mistakes_are_caught_before_any_request() -> None:
    async with api(echo) as (client, seen):
        with pytest.raises(ValueError, match="namespace is required"):
            await client.get(JOBS, "j1")
        with pytest.raises(ValueError, match="cluster-scoped"):
            await client.get(NODES, "n1", namespace="ns")
        with pytest.raises(ValueError, match="namespace is required"):
            await client.create(JOBS, {"metadata": {"name": "j"}})
    assert seen == []


def test_resource_api_version() -> None:
    assert JOBS.api_version == "batch/v1"
    assert NODES.api_version == "v1"
    assert WORKER_CLUSTERS.api_version == "jobrelay.dev/v1alpha1"


# -- writes -------------------------------------------------------------------------------


async def test_create_takes_the_namespace_from_the_object() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "a"}}
    async with api(echo) as (client, seen):
        created = await client.create(JOBS, job, field_manager="jobrelay")
    assert created == job
    assert seen[0].method == "POST"
    assert seen[0].url.path == "/apis/batch/v1/namespaces/a/jobs"
    assert seen[0].url.params["fieldManager"] == "jobrelay"
    assert seen[0].headers["content-type"] == "application/json"


async def test_replace_status_puts_to_the_subresource() -> None:
    job = {"metadata": {"name": "j", "namespace": "a", "resourceVersion": "7"}, "status": {}}
    async with api(echo) as (client, seen):
        await client.replace(JOBS, job, subresource="status")
    assert (seen[0].method, seen[0].url.path) == (
        "PUT",
        "/apis/batch/v1/namespaces/a/jobs/j/status",
    )
    assert body_of(seen[0]) == job


@pytest.mark.parametrize("patch_type", list(PatchType))
async def test_patch_sends_the_content_type_of_its_kind(patch_type: PatchType) -> None:
    body: Any = (
        [{"op": "add", "path": "/x", "value": 1}] if patch_type is PatchType.JSON else {"x": 1}
    )
    async with api(echo) as (client, seen):
        await client.patch(
            JOBS,
            "j",
            body,
            namespace="a",
            patch_type=patch_type,
            field_manager="jobrelay",
            subresource="status",
        )
    assert seen[0].method == "PATCH"
    assert seen[0].url.path == "/apis/batch/v1/namespaces/a/jobs/j/status"
    assert seen[0].headers["content-type"] == patch_type.value
    assert body_of(seen[0]) == body


async def test_server_side_apply_needs_a_field_manager_and_can_force() -> None:
    async with api(echo) as (client, seen):
        with pytest.raises(ValueError, match="field_manager"):
            await client.patch(JOBS, "j", {}, namespace="a", patch_type=PatchType.APPLY)
        await client.patch(
            JOBS,
            "j",
            {},
            namespace="a",
            patch_type=PatchType.APPLY,
            field_manager="jobrelay",
            force=True,
        )
    assert dict(seen[0].url.params) == {"fieldManager": "jobrelay", "force": "true"}


async def test_delete_sends_propagation_and_preconditions() -> None:
    async with api(echo) as (client, seen):
        await client.delete(
            JOBS, "j", namespace="a", uid="u-1", resource_version="9", grace_period_seconds=0
        )
        await client.delete(NODES, "n", propagation_policy=None)
    assert seen[0].method == "DELETE"
    assert body_of(seen[0]) == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Background",
        "preconditions": {"uid": "u-1", "resourceVersion": "9"},
        "gracePeriodSeconds": 0,
    }
    assert body_of(seen[1]) == {"kind": "DeleteOptions", "apiVersion": "v1"}


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "flag"),
    [
        (404, "NotFound", "is_not_found"),
        (409, "Conflict", "is_conflict"),
        (409, "AlreadyExists", "is_already_exists"),
        (410, "Expired", "is_gone"),
        (422, "Invalid", "is_invalid"),
    ],
)
async def test_status_bodies_become_api_errors(code: int, reason: str, flag: str) -> None:
    async with api(lambda r: json_response(code, status(code, reason, "details here"))) as (
        client,
        _,
    ):
        with pytest.raises(ApiError) as caught:
            await client.get(JOBS, "j", namespace="a")
    error = caught.value
    assert (error.code, error.reason, error.message) == (code, reason, "details here")
    flags = ["is_not_found", "is_conflict", "is_already_exists", "is_gone", "is_invalid"]
    assert [f for f in flags if getattr(error, f)] == [flag]
    assert not error.is_unreachable


async def test_a_body_without_status_gets_its_reason_from_the_code() -> None:
    async with api(lambda r: httpx2.Response(404, content=b"404 page not found")) as (client, _):
        with pytest.raises(ApiError) as caught:
            await client.get(JOBS, "j", namespace="a")
    assert caught.value.is_not_found
    assert caught.value.message == "404 page not found"


async def test_transport_failures_are_unreachable_api_errors() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    def slow(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("too slow")

    for handler, reason in ((refuse, "Unreachable"), (slow, "Timeout")):
        async with api(handler) as (client, _):
            with pytest.raises(ApiError) as caught:
                await client.get(NODES, "n")
        assert caught.value.is_unreachable
        assert (caught.value.code, caught.value.reason) == (0, reason)


async def test_an_unreachable_error_names_the_root_cause_and_address() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6443)")
        except OSError as error:
            raise httpx2.ConnectError("All connection attempts failed") from error

    async with api(refuse) as (client, _):
        with pytest.raises(ApiError) as caught:
            await client.get(NODES, "n")
    assert caught.value.message == (
        "ConnectError: All connection attempts failed (ConnectionRefusedError: "
        "[Errno 111] Connect call failed ('127.0.0.1', 6443))"
    )


def test_api_error_from_a_watch_error_status() -> None:
    error = ApiError.from_status(status(410, "Expired", "too old resource version: 1 (2)"))
    assert error.is_gone and error.code == 410
    assert ApiError.from_status({"code": 500}).reason == "InternalError"


# -- list ---------------------------------------------------------------------------------


def paged_lister(total: int, expire_continue_once: bool = False) -> Handler:
    expired = [False]

    def handler(request: httpx2.Request) -> httpx2.Response:
        params = request.url.params
        start = int(params.get("continue") or 0)
        if start and expire_continue_once and not expired[0]:
            expired[0] = True
            return json_response(410, status(410, "Expired", "continue token expired"))
        limit = int(params.get("limit") or 0) or total
        names = [f"n{i}" for i in range(start, min(start + limit, total))]
        metadata = {"resourceVersion": "77"}
        if start + limit < total:
            metadata["continue"] = str(start + limit)
        return json_response(
            200,
            {
                "kind": "NodeList",
                "apiVersion": "v1",
                "metadata": metadata,
                "items": [{"metadata": {"name": n}} for n in names],
            },
        )

    return handler


async def test_list_follows_continue_tokens_and_types_its_items() -> None:
    async with api(paged_lister(5)) as (client, seen):
        result = await client.list(NODES, label_selector="a=b", field_selector="x=y", limit=2)
    assert [i["metadata"]["name"] for i in result.items] == ["n0", "n1", "n2", "n3", "n4"]
    assert result.resource_version == "77"
    assert all(i["kind"] == "Node" and i["apiVersion"] == "v1" for i in result.items)
    assert len(seen) == 3
    assert seen[1].url.params["continue"] == "2"
    assert seen[1].url.params["labelSelector"] == "a=b"
    assert seen[1].url.params["fieldSelector"] == "x=y"


async def test_list_falls_back_to_one_page_when_the_continue_token_expires() -> None:
    async with api(paged_lister(5, expire_continue_once=True)) as (client, seen):
        result = await client.list(NODES, limit=2)
    assert [i["metadata"]["name"] for i in result.items] == ["n0", "n1", "n2", "n3", "n4"]
    assert "limit" not in seen[-1].url.params and "continue" not in seen[-1].url.params


def sized_lister(sizes: list[int], cap: int) -> Handler:
    """Items of ``sizes`` bytes; a page whose body would pass ``cap`` is cut off as the
    client's cap would cut it (the MockTransport body is read whole, so: 413-free 200
    with a body of cap + 1 bytes)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        params = request.url.params
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0) or len(sizes)
        names = range(start, min(start + limit, len(sizes)))
        metadata = {"resourceVersion": "9"}
        if start + limit < len(sizes):
            metadata["continue"] = str(start + limit)
        items = [{"metadata": {"name": f"n{i}"}, "data": {"x": "<" * sizes[i]}} for i in names]
        return json_response(200, {"metadata": metadata, "items": items})

    return handler


@contextlib.asynccontextmanager
async def capped_api(handler: Handler, cap: int) -> AsyncIterator[tuple[ApiClient, list[Any]]]:
    seen: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return handler(request)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(record), base_url="https://api")
    options = ApiOptions(max_body_bytes=cap)
    async with ApiClient(http, cluster="c1", options=options) as client:
        yield client, seen


async def test_a_page_past_the_body_cap_is_read_again_in_smaller_pages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "jobrelay.kube.client")
    # Eight objects of 1,000 bytes (with their envelope) under a 3,000-byte cap: pages
    # of 8 and 4 are too long, pages of 2 fit; the rest of the list keeps pages of 2.
    async with capped_api(sized_lister([1000] * 8, 3000), 3000) as (client, seen):
        result = await client.list(NODES, limit=8)
    assert [i["metadata"]["name"] for i in result.items] == [f"n{i}" for i in range(8)]
    assert [r.url.params.get("limit") for r in seen] == ["8", "4", "2", "2", "2", "2"]
    assert [r.url.params.get("continue") for r in seen] == [None, None, None, "2", "4", "6"]
    assert "in pages of 2" in caplog.text


async def test_a_big_object_among_small_ones_shrinks_only_the_pages_from_it_on() -> None:
    sizes = [10, 10, 10, 10, 2500, 400, 400]
    async with capped_api(sized_lister(sizes, 3000), 3000) as (client, seen):
        result = await client.list(NODES, limit=4)
    assert len(result.items) == 7
    limits = [(r.url.params.get("continue"), r.url.params.get("limit")) for r in seen]
    assert limits == [(None, "4"), ("4", "4"), ("4", "2"), ("4", "1"), ("5", "1"), ("6", "1")]


async def test_one_object_past_the_cap_on_its_own_is_an_error_that_says_where() -> None:
    async with capped_api(sized_lister([10, 5000, 10], 3000), 3000) as (client, seen):
        with pytest.raises(ResponseTooLarge) as caught:
            await client.list(NODES, limit=2)
    assert "one Node on its own (after 1 listed)" in caught.value.message
    # Bounded: down to pages of 1, then the one that does not fit ends the list.
    assert [r.url.params.get("limit") for r in seen] == ["2", "1", "1"]


async def test_a_whole_list_fallback_too_long_is_paged_again_from_the_start() -> None:
    lister = sized_lister([1000] * 4, 3000)
    expired = [False]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("continue") and not expired[0]:
            expired[0] = True
            return json_response(410, status(410, "Expired", "continue token expired"))
        return lister(request)

    async with capped_api(handler, 3000) as (client, seen):
        result = await client.list(NODES, limit=2)
    assert len(result.items) == 4
    # 2 ok, continue expired, whole list too long, then pages of 2 from the start.
    assert [r.url.params.get("limit") for r in seen] == ["2", "2", None, "2", "2"]


# -- watch --------------------------------------------------------------------------------


async def test_watch_streams_decoded_events_and_skips_blank_lines() -> None:
    lines = [
        b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n\n',
        b'{"type":"BOOKMARK","obj',
        b'ect":{"metadata":{"resourceVersion":"9"}}}\n{"type":"DELETED",',
        b'"object":{"metadata":{"name":"a"}}}',  # the last line may lack its newline
    ]

    async def body() -> AsyncIterator[bytes]:
        for line in lines:
            yield line

    async with (
        api(lambda r: httpx2.Response(200, content=body())) as (client, seen),
        client.watch(NODES, resource_version="5", timeout_seconds=30) as events,
    ):
        received = [(e.type, e.object["metadata"]) async for e in events]
    assert received == [
        ("ADDED", {"name": "a"}),
        ("BOOKMARK", {"resourceVersion": "9"}),
        ("DELETED", {"name": "a"}),
    ]
    assert dict(seen[0].url.params) == {
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": "5",
        "timeoutSeconds": "30",
    }


async def test_a_refused_watch_raises_before_streaming() -> None:
    async with api(lambda r: json_response(410, status(410, "Expired"))) as (client, _):
        with pytest.raises(ApiError) as caught:
            async with client.watch(NODES, resource_version="1"):
                pytest.fail("must not get here")
    assert caught.value.is_gone


async def test_a_broken_stream_surfaces_as_an_unreachable_api_error() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'
        raise httpx2.ReadError("reset")

    async with api(lambda r: httpx2.Response(200, content=body())) as (client, _):
        with pytest.raises(ApiError) as caught:
            async with client.watch(NODES) as events:
                async for _ in events:
                    pass
    assert caught.value.is_unreachable


# -- counting -----------------------------------------------------------------------------


async def test_requests_are_counted_per_verb_and_reported_to_the_hook() -> None:
    records: list[RequestRecord] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.method == "DELETE":
            return json_response(404, status(404, "NotFound"))
        return echo(request)

    async with api(handler, on_request=records.append) as (client, _):
        await client.get(NODES, "n")
        await client.get(NODES, "n")
        await client.patch(NODES, "n", {"x": 1})
        with pytest.raises(ApiError):
            await client.delete(NODES, "n")
        assert client.request_counts == {"get": 2, "patch": 1, "delete": 1}
    assert [(r.cluster, r.verb, r.resource, r.code) for r in records] == [
        ("c1", "get", "nodes", 200),
        ("c1", "get", "nodes", 200),
        ("c1", "patch", "nodes", 200),
        ("c1", "delete", "nodes", 404),
    ]
    assert all(r.seconds >= 0 for r in records)


@pytest.mark.logs_exceptions
async def test_a_failing_hook_does_not_fail_the_request() -> None:
    def hook(record: RequestRecord) -> None:
        raise RuntimeError("metrics bug")

    async with api(echo, on_request=hook) as (client, _):
        assert await client.get(NODES, "n") == {"ok": True}


async def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = iter(["refused", "refused", "refused", "ok", "ok", "refused"])

    def flaky(request: httpx2.Request) -> httpx2.Response:
        if next(answers) == "refused":
            raise httpx2.ConnectError("connection refused", request=request)
        return json_response(404, status(404, "NotFound"))  # an answer, even if a refusal

    with caplog.at_level(logging.DEBUG, logger="jobrelay.kube.requesting"):
        async with api(flaky) as (client, _):
            for _ in range(6):
                with pytest.raises(ApiError):
                    await client.get(JOBS, "j", namespace="ns")
                assert client.answering == (len(caplog.records) % 2 == 0)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["WARNING", "INFO", "WARNING"]
    assert "apiserver c1 does not answer" in lines[0][1] and "retried with backoff" in lines[0][1]
    assert lines[1][1] == "apiserver c1 answers again"


async def test_a_closed_write_fence_refuses_every_write_without_sending_it() -> None:
    allowed = [False]
    async with api(lambda request: json_response(200, {"metadata": {}})) as (client, seen):
        client.write_fence = lambda: allowed[0]
        job = {"metadata": {"name": "j", "namespace": "ns"}}
        attempts = [
            client.create(JOBS, job),
            client.replace(JOBS, job),
            client.patch(JOBS, "j", {"spec": {}}, namespace="ns"),
            client.delete(JOBS, "j", namespace="ns"),
        ]
        for attempt in attempts:
            with pytest.raises(WriteFenced) as refused:
                await attempt
            assert (refused.value.code, refused.value.reason) == (0, "NotLeader")
        # Reads and watches are never fenced: a standby keeps its caches warm.
        await client.get(JOBS, "j", namespace="ns")
        assert [r.method for r in seen] == ["GET"]
        allowed[0] = True
        await client.create(JOBS, job)
        assert [r.method for r in seen] == ["GET", "POST"]


def test_a_client_takes_its_write_fence_from_its_options() -> None:
    fence = lambda: True  # noqa: E731
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: json_response(200, {})))
    assert ApiClient(http, options=ApiOptions(write_fence=fence)).write_fence is fence
    assert ApiClient(http).write_fence is None
