"""ApiClient.pod_log (a streaming GET of pods/{pod}/log) and review (never fenced)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import TOKEN_REVIEWS


def _client(handler: httpx2.MockTransport) -> ApiClient:
    return ApiClient(httpx2.AsyncClient(transport=handler, base_url="https://worker"))


async def test_streams_the_log_with_its_options() -> None:
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, content=b"line 1\nline 2\n")

    params = {"tailLines": "2", "follow": "true"}
    async with (
        _client(httpx2.MockTransport(answer)) as client,
        client.pod_log("team-a", "p-0", params) as chunks,
    ):
        text = b"".join([chunk async for chunk in chunks])
    assert text == b"line 1\nline 2\n"
    (request,) = seen
    assert request.url.path == "/api/v1/namespaces/team-a/pods/p-0/log"
    assert dict(request.url.params) == {"tailLines": "2", "follow": "true"}


async def test_a_refusal_is_an_api_error() -> None:
    status = {"kind": "Status", "code": 400, "reason": "BadRequest",
              "message": 'previous terminated container "main" in pod "p-0" not found'}  # fmt: skip

    def answer(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(400, content=json.dumps(status).encode())

    async with _client(httpx2.MockTransport(answer)) as client:
        with pytest.raises(ApiError) as raised:
            async with client.pod_log("team-a", "p-0", {"previous": "true"}):
                pass
    assert raised.value.code == 400 and "not found" in raised.value.message


async def test_reviews_pass_a_shut_write_fence() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        review = json.loads(request.content)
        return httpx2.Response(200, json={**review, "status": {"authenticated": False}})

    async with _client(httpx2.MockTransport(answer)) as client:
        client.write_fence = lambda: False  # a standby
        review = await client.review(TOKEN_REVIEWS, {"kind": "TokenReview", "spec": {"token": "t"}})
    assert review["status"] == {"authenticated": False}


async def test_an_idle_follow_is_a_timeout_not_an_outage() -> None:
    class Quiet(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"hello\n"
            raise httpx2.ReadTimeout("no data")

    def answer(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=Quiet())

    async with _client(httpx2.MockTransport(answer)) as client:
        with pytest.raises(ApiError) as raised:
            async with client.pod_log("ns", "p", {"follow": "true"}) as chunks:
                async for _ in chunks:
                    pass
        assert client.answering  # no "does not answer" for a quiet pod
    assert raised.value.reason == "Timeout"
