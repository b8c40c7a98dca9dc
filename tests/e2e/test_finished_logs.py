"""Logs that outlive the run: a finished workload's mirror and pods stay on its worker for
``--finished-mirror-ttl`` (here 60 s: room for three reads, two of them CLI processes, on
a loaded machine), so `jobrelay logs` reads a failed Job's pods after it failed; once the
ttl has passed and the relay deleted the mirror, it says when the Job
finished and when its pods were removed, with the setting that keeps them longer, and
exits 1. Neither answer says it waits for a worker (issue 34, "Logs").

Every simulated pod prints ``cluster.SIMULATED_LOG`` (KWOK's kubelet serves it); the
Job's pods fail (``fleet.jobrelay.dev/outcome: fail``) until its backoffLimit is reached.
"""

from __future__ import annotations

import time

import pytest

from jobrelay.localfleet.cluster import SIMULATED_LOG, Credential
from jobrelay.relayapi.route_rules import API_PATH
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available, manager_get
from tests.e2e.support import ControllerProcess, Relay
from tests.e2e.test_remote_logs import jobrelay_logs, lines
from tests.e2e.worker_identity import SERVICE_ACCOUNT
from tests.kubetools import job_manifest

pytestmark = pytest.mark.e2e
# Workers added as docs/add-a-worker.md says: the least-privilege identity reads the logs.
WORKERS_ADDED = SERVICE_ACCOUNT

TTL = 60.0
CONTROLLER_ARGS = [*API_ARGS, "--finished-mirror-ttl", "60s"]


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, str]:
    return await api_available(controller, relay_fleet)


async def test_a_failed_jobs_logs_are_read_until_the_ttl_then_told_removed(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    manifest = job_manifest(
        "flaky", backoff_limit=1, annotations={"fleet.jobrelay.dev/outcome": "fail"}
    )
    await relay.submit(manifest)
    job = await relay.wait_finished("flaky")
    ended = time.monotonic()
    assert any(
        c.get("type") == "Failed" and c.get("status") == "True"
        for c in job["status"].get("conditions") or []
    ), job["status"]
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    panel_log = f"{API_PATH}/namespaces/{relay.namespace}/jobs/flaky/log"

    # Within the ttl: its mirror is kept, and so are its failed pods with their logs.
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "flaky")
    assert (code, out) == (0, lines(*SIMULATED_LOG)), err
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "flaky", "--all-pods")
    assert code == 0, err
    assert {line.split("] ", 1)[1] for line in out.splitlines()} == set(SIMULATED_LOG)
    assert "waits for a worker" not in out + err
    # The dashboard's own request (a follow of every pod): it reads them, and ends.
    panel = await manager_get(user, panel_log, follow="true", allPods="true", tailLines="500")
    assert panel.status_code == 200, panel.text
    assert {line.split("] ", 1)[1] for line in panel.text.splitlines()} == set(SIMULATED_LOG)

    # Then the relay deletes it (one look at finish + ttl), no sooner.
    await relay.wait_mirror_gone(job["metadata"]["uid"], timeout=TTL + 40)
    assert time.monotonic() - ended >= TTL - 5  # its finish time is whole seconds
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "flaky")
    assert code == 1, (out, err)
    assert out == ""
    assert f"Job {relay.namespace}/flaky finished at " in err
    assert "its pods were removed at " in err
    assert "(--finished-mirror-ttl 1m; set it longer to keep logs longer)" in err
    assert "waits for a worker" not in err
    # The API (and the dashboard, which shows its message) says the same.
    panel = await manager_get(user, panel_log, follow="true", allPods="true", tailLines="500")
    assert panel.status_code == 404 and panel.json()["reason"] == "PodsRemoved", panel.text
    assert panel.json()["message"] == err.strip()
