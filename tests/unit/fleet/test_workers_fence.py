"""The worker pool writes WorkerCluster status only while this replica may write."""

from __future__ import annotations

import httpx2
import msgspec

from jobrelay.fleet.workers import PoolOptions, WorkerPool
from jobrelay.kube.api import ApiClient, ApiOptions


async def test_status_writes_wait_for_the_fence_to_open() -> None:
    patched: list[str] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        patched.append(f"{request.method} {request.url.path}")
        return httpx2.Response(200, content=msgspec.json.encode({}))

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handle), base_url="https://m")
    leading = [False]
    options = PoolOptions(
        namespace="jobrelay-system",
        controller_name="jobrelay.dev/relay",
        origin="hq",
        sync_timeout=1,
        status_interval=1,
        health_timeout=6,
        lost_timeout=900,
        api=ApiOptions(write_fence=lambda: leading[0]),
    )
    async with ApiClient(http, cluster="manager", options=options.api) as manager:
        pool = WorkerPool(manager, [], lambda key: None, options)
        status = {"connected": False, "reason": "Unreachable", "message": "refused"}
        await pool._write_conditions("worker-1", **status)  # type: ignore[arg-type]
        assert patched == []  # a standby: quietly nothing, no refused request either
        leading[0] = True
        await pool._write_conditions("worker-1", **status)  # type: ignore[arg-type]
        assert patched == ["PATCH /apis/jobrelay.dev/v1alpha1/workerclusters/worker-1/status"]
