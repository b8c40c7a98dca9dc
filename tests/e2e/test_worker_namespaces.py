"""A worker namespace jobrelay did not open is never used, and is used once its admin
labels it.

The test's namespace exists on the manager and, unlabelled, on both workers (a
tenant's or the worker admin's namespace of the same name): the Job is held with
the reason in jobrelay.dev/not-placed and a NotPlaced Event, and no mirror appears.
Once one worker's admin labels it jobrelay.dev/origin=<the manager's origin>, the
Job runs there.
"""

from __future__ import annotations

import pytest

from jobrelay.fleet.workerclusters import default_origin
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, NAMESPACES
from jobrelay.vocabulary.names import ORIGIN_LABEL
from tests.e2e.conftest import NamespaceFactory
from tests.e2e.support import Relay
from tests.e2e.test_capacity_placement import wait_held
from tests.kubetools import job_manifest

pytestmark = pytest.mark.e2e


async def test_an_unlabelled_worker_namespace_is_never_used_until_labelled(
    make_namespace: NamespaceFactory,
    make_relay: object,
    clients: dict[str, ApiClient],
) -> None:
    namespace = await make_namespace(["manager"])
    workers = [name for name in clients if name != "manager"]
    for worker in workers:  # someone else's namespace of that name: no origin label
        await clients[worker].create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    relay: Relay = await make_relay(namespace)  # type: ignore[operator]
    await relay.submit(job_manifest("tenant-job"))
    origin = await default_origin(clients["manager"])
    message = await wait_held(relay, "tenant-job")
    for worker in workers:
        assert (
            f"{worker}: namespace {namespace} exists there and is not open to this manager "
            f"(label {ORIGIN_LABEL}={origin})"
        ) in message, message
        listed = await clients[worker].list(JOBS, namespace=namespace)
        assert not listed.items, f"a mirror appeared on {worker}"

    # The admin of the first worker opens it.
    opened = workers[0]
    await clients[opened].patch(
        NAMESPACES, namespace, {"metadata": {"labels": {ORIGIN_LABEL: origin}}}
    )
    done = await relay.verify("tenant-job", outcome="Complete")
    assert done.cluster == opened
