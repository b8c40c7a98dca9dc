"""Issue 33: objects sized by tenants do not stop the controller.

Go writes ``<`` as ``\\u003c`` (six bytes), so 11 ConfigMaps of 1 MiB of ``<`` in one
namespace, or 8 Jobs carrying 1.4 MiB of ``<``, make one LIST page of 500 longer than the
client's 64 MiB body cap. Before, the informer relisted for ever at its next list (a
restart), its sync was awaited without bound, and nothing was dispatched. Now the page is
read again in halved pages: after a restart, a normal Job elsewhere still completes, and
``/readyz`` turns ready.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import CONFIGMAPS, JOBS
from tests.e2e.conftest import NamespaceFactory
from tests.e2e.support import ControllerProcess, Relay
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024


def big_configmap(name: str) -> dict[str, Any]:
    # A ConfigMap's data may hold at most 1 MiB: all of it, less room for the key.
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"bulk": "<" * (MIB - 64)}}  # fmt: skip


def big_unmanaged_job(name: str) -> dict[str, Any]:
    """Suspended, not delegated: no controller runs it, every Jobs LIST carries it."""
    job = job_manifest(name, suspend=True)
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "BULK", "value": "<" * int(1.4 * MIB)}]
    return job


async def readyz(controller: ControllerProcess) -> tuple[int, dict[str, Any]] | None:
    metrics = controller.metrics_url()
    if metrics is None or not controller.running:
        return None
    try:
        async with httpx2.AsyncClient(timeout=5, trust_env=False) as http:
            answer = await http.get(metrics.removesuffix("/metrics") + "/readyz")
    except httpx2.HTTPError:
        return None
    return answer.status_code, answer.json()


async def test_pages_past_the_cap_after_a_restart_do_not_stop_dispatch(
    controller: ControllerProcess,
    relay: Relay,
    clients: dict[str, ApiClient],
    make_namespace: NamespaceFactory,
) -> None:
    manager = clients["manager"]
    crowded = await make_namespace(["manager"])
    await asyncio.gather(
        *(manager.create(CONFIGMAPS, big_configmap(f"bulk-{n}"), namespace=crowded)
          for n in range(11)),
        *(manager.create(JOBS, big_unmanaged_job(f"bulk-{n}"), namespace=crowded)
          for n in range(8)),
    )  # fmt: skip
    since = controller.log_size()
    await controller.restart(manager)

    await relay.submit(job_manifest("normal"))
    await relay.verify("normal", timeout=90)

    async def ready() -> dict[str, Any] | None:
        answer = await readyz(controller)
        return answer[1] if answer is not None and answer[0] == 200 else None

    body = await eventually(ready, timeout=60, what="/readyz 200")
    assert body["ready"] is True and "waiting" not in body
    log = controller.log_text(since)
    assert "in pages of" in log, "the big pages were read again in smaller ones"
