"""A tenant's pod template asking for a quantity no scheduler can count is refused, and
the rest of the fleet goes on.

The apiserver stores ``memory: "1e999999"`` in a batch/v1 Job as written, and
``"1e1000000"`` as ``"10e999999"``; JobSet takes both too. Before, reading the first
cost ~25 s of CPU on the controller's event loop per evaluation and the second raised
decimal.Overflow. Now both Jobs and the JobSet get a Warning Event ``InvalidQuantity``
naming the container and the resource, are never placed, and the Jobs submitted
meanwhile complete.
"""

from __future__ import annotations

import copy
import time

import pytest

from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME
from tests.e2e.support import ControllerProcess, Relay, placement
from tests.kubetools import Obj, job_manifest

pytestmark = pytest.mark.e2e

JOBSETS = JobSetKind.ref
CONTROLLER_ARGS = ["--kind", "Job.v1.batch", "--kind", JOBSETS.name]
UNUSABLE = {"huge": "1e999999", "overflow": "1e1000000"}


def asking_memory(name: str, memory: str) -> Obj:
    body = job_manifest(name)
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    return body


def jobset_asking_memory(name: str, memory: str) -> Obj:
    template = asking_memory("x", memory)["spec"]
    return {
        "apiVersion": JOBSETS.api_version,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "managedBy": DEFAULT_CONTROLLER_NAME,
            "successPolicy": {"operator": "All"},
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {"name": "workers", "replicas": 1, "template": {"spec": copy.deepcopy(template)}}
            ],
        },
    }


async def refused(relay: Relay, uid: str, what: str) -> str:
    event = await relay.wait_event(
        uid,
        lambda e: e.get("reason") == "InvalidQuantity" and e.get("type") == "Warning",
        what=f"an InvalidQuantity Event on {what}",
    )
    return str(event["message"])


async def test_unusable_quantities_are_refused_while_other_jobs_complete(
    relay: Relay, controller: ControllerProcess
) -> None:
    since = controller.log_size()
    bad: dict[str, str] = {}
    for name, memory in UNUSABLE.items():
        bad[name] = (await relay.submit(asking_memory(name, memory)))["metadata"]["uid"]
    jobset = await relay.manager.create(
        JOBSETS, jobset_asking_memory("huge-set", "1e999999"), namespace=relay.namespace
    )
    started = time.monotonic()
    fine = [f"fine-{index}" for index in range(3)]
    for name in fine:
        await relay.submit(job_manifest(name))
    for name in fine:
        await relay.verify(name, outcome="Complete", reason="CompletionsReached")
    # Each was stuck ~25 s (or forever) in the controller before; now all is quick.
    assert time.monotonic() - started < 60

    for name, uid in bad.items():
        message = await refused(relay, uid, name)
        # As the apiserver stored it: "10e999999" for "1e1000000".
        memory = (await relay.get(name))["spec"]["template"]["spec"]["containers"][0]["resources"][
            "requests"
        ]
        assert f"container 'main', memory: {memory['memory']!r}" in message, message
        assert "larger than Kubernetes can count" in message, message
    message = await refused(relay, jobset["metadata"]["uid"], "the JobSet")
    assert "replicated job 'workers', container 'main', memory:" in message, message

    # Never placed, never mirrored: also once reconciled again, as a retry or a held pass
    # would.
    await relay.settled(*bad)
    await relay.settled("huge-set", resource=JOBSETS)
    for name, uid in bad.items():
        assert not placement(await relay.get(name)), name
        assert relay.mirror_uids(uid) == set(), name
    stored_set = await relay.manager.get(JOBSETS, "huge-set", namespace=relay.namespace)
    assert not placement(stored_set)
    for worker in relay.workers:
        with pytest.raises(ApiError) as missing:
            await relay.clients[worker].get(JOBSETS, "huge-set", namespace=relay.namespace)
        assert missing.value.is_not_found, worker
    log = controller.log_text(since)
    assert "Traceback" not in log and "Overflow" not in log
    controller.assert_clean_log(since)
