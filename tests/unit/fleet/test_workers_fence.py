"""The status writer writes WorkerCluster status only while this replica may write."""

from __future__ import annotations

import httpx2
import msgspec

from jobrelay.fleet.workers import PoolOptions
from jobrelay.fleet.workers.liveness_rules import LostClock
from jobrelay.fleet.workers.record import WorkerRecord
from jobrelay.fleet.workers.status_writer import StatusWriter
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions


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
        writer = StatusWriter(
            manager, origin=options.origin, status_interval=options.status_interval,
            write_fence=options.api.write_fence,
        )  # fmt: skip
        record = WorkerRecord("worker-1", LostClock(options.lost_timeout))
        status = {"connected": False, "reason": "Unreachable", "message": "refused"}
        await writer.write(record, None, **status)  # type: ignore[arg-type]
        assert patched == []  # a standby: quietly nothing, no refused request either
        leading[0] = True
        await writer.write(record, None, **status)  # type: ignore[arg-type]
        assert patched == ["PATCH /apis/jobrelay.dev/v1alpha1/workerclusters/worker-1/status"]
