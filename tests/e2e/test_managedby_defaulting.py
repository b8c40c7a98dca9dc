"""The tenant writes no managedBy: the controller's webhook sets it (issue 34, item 1).

The module's controller serves and registers the aggregated API and, with it, the
MutatingWebhookConfiguration ``jobrelay-managedby`` (a URL at its own loopback
address, its serving CA as caBundle, failurePolicy Fail). Then, on the local fleet:

- a plain Job (no managedBy) in a namespace labelled ``jobrelay.dev/relay: enabled``
  shows ``spec.managedBy: jobrelay.dev/relay`` on the manager, gets a mirror on a
  worker and completes; a dry-run create there shows the field too;
- the same Job in an unlabelled namespace runs on the manager (its Job controller);
- a Job labelled ``jobrelay.dev/queue: <a RelayQueue>`` in an unlabelled namespace is
  relayed;
- a Job labelled ``jobrelay.dev/relay: disabled`` in an enabled namespace runs on the
  manager.
- while no controller answers (stopped cleanly: the webhook stays registered), a plain
  Job in an enabled namespace is refused, never run on the manager; once a controller
  registers again it is created and relayed.

A RayJob's borrowed value and a PyTorchJob's ``spec.runPolicy.managedBy`` are shown
where those kinds run, ``e2e/test_logs_every_kind.py``; the chart's own configuration,
served by the controller run as its pod, by ``e2e/test_deploy_as_shipped.py`` (and
rendered by ``integration/chart/test_chart_webhook.py``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import (
    JOBS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NAMESPACES,
    PODS,
    RELAY_QUEUES,
)
from jobrelay.relayapi.managedby_webhook_rules import (
    RELAY_DISABLED,
    RELAY_ENABLED,
    RELAY_LABEL,
    WEBHOOK_CONFIGURATION,
)
from jobrelay.vocabulary.names import QUEUE_LABEL
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available, webhook_in_force
from tests.e2e.support import ControllerProcess, Relay, placement
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

CONTROLLER_ARGS = API_ARGS
RELAY = "jobrelay.dev/relay"
NAME_LABEL = "kubernetes.io/metadata.name"


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, Any]:
    """The webhook configuration, once the leader has registered it with the APIService."""
    await api_available(controller, relay_fleet)
    async with relay_fleet.client("manager") as manager:
        found: dict[str, Any] = await manager.get(
            MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION
        )
    return found


async def label_namespace(manager: ApiClient, namespace: str, value: str) -> None:
    await manager.patch(NAMESPACES, namespace, {"metadata": {"labels": {RELAY_LABEL: value}}})
    if value == RELAY_ENABLED:
        await webhook_in_force(manager, JOBS, namespace, plain_job("probe"), managed_by_relay)


def managed_by_relay(job: dict[str, Any]) -> bool:
    return bool(job["spec"].get("managedBy") == RELAY)


@pytest.fixture
async def queue(clients: dict[str, ApiClient], namespace: str) -> AsyncIterator[str]:
    """A RelayQueue taking the test's namespace."""
    name = f"q-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {"matchLabels": {NAME_LABEL: namespace}}},
    }  # fmt: skip
    await clients["manager"].create(RELAY_QUEUES, body)
    try:
        yield name
    finally:
        with contextlib.suppress(ApiError):
            await clients["manager"].delete(RELAY_QUEUES, name)


def plain_job(name: str, **labels: str) -> dict[str, Any]:
    body = job_manifest(name, annotations={"fleet.jobrelay.dev/duration": "1s"})
    assert "managedBy" not in body["spec"]
    if labels:
        body["metadata"]["labels"] = dict(labels)
    return body


async def assert_relayed(relay: Relay, name: str) -> None:
    """Placed on a worker, mirrored there, and complete on the manager."""
    await relay.wait_placed(name)
    job = await relay.wait_finished(name)
    assert is_true(job, "Complete"), job["status"]
    assert job["spec"]["managedBy"] == RELAY
    worker, mirror = await relay.final_mirror(job["metadata"]["uid"])
    assert worker in relay.workers and mirror["metadata"]["name"] == name


async def assert_ran_on_the_manager(relay: Relay, name: str) -> None:
    """Run by the manager's own Job controller, untouched by jobrelay."""
    job = await relay.wait_finished(name)
    assert is_true(job, "Complete"), job["status"]
    assert "managedBy" not in job["spec"]
    uid = job["metadata"]["uid"]
    pods = await relay.manager.list(
        PODS, namespace=relay.namespace, label_selector=f"batch.kubernetes.io/controller-uid={uid}"
    )
    assert pods.items, "the Job did not run on the manager's own nodes"
    await relay.settled(name)
    assert not placement(await relay.get(name))
    for worker in relay.workers:
        assert relay.jobs_named(name, worker) == [], f"a Job {name!r} appeared on {worker}"


def test_the_controller_registers_its_webhook_as_it_registers_the_apiservice(
    registered: dict[str, Any],
) -> None:
    names = [webhook["name"] for webhook in registered["webhooks"]]
    assert names == ["namespaces.managedby.jobrelay.dev", "queued.managedby.jobrelay.dev"]
    for webhook in registered["webhooks"]:
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:")
        assert webhook["clientConfig"]["url"].endswith("/mutate/managedby")


async def test_a_plain_job_in_an_enabled_namespace_is_relayed(
    registered: dict[str, Any], relay: Relay
) -> None:
    await label_namespace(relay.manager, relay.namespace, RELAY_ENABLED)
    created = await relay.submit(plain_job("plain"), managed=False)
    assert created["spec"]["managedBy"] == RELAY
    await assert_relayed(relay, "plain")


async def test_a_dry_run_create_shows_the_field(registered: dict[str, Any], relay: Relay) -> None:
    await label_namespace(relay.manager, relay.namespace, RELAY_ENABLED)
    answer = await relay.manager.create(
        relay.resource, plain_job("dry"), namespace=relay.namespace, dry_run=True
    )
    assert answer["spec"]["managedBy"] == RELAY
    listed = await relay.manager.list(relay.resource, namespace=relay.namespace)
    assert listed.items == []  # nothing stored


async def test_the_same_job_in_an_unlabelled_namespace_runs_on_the_manager(
    registered: dict[str, Any], relay: Relay
) -> None:
    created = await relay.submit(plain_job("local"), managed=False)
    assert "managedBy" not in created["spec"]
    await assert_ran_on_the_manager(relay, "local")


async def test_a_queue_labelled_job_in_an_unlabelled_namespace_is_relayed(
    registered: dict[str, Any], relay: Relay, queue: str
) -> None:
    created = await relay.submit(plain_job("queued", **{QUEUE_LABEL: queue}), managed=False)
    assert created["spec"]["managedBy"] == RELAY
    await assert_relayed(relay, "queued")


async def test_a_job_labelled_disabled_in_an_enabled_namespace_runs_on_the_manager(
    registered: dict[str, Any], relay: Relay
) -> None:
    await label_namespace(relay.manager, relay.namespace, RELAY_ENABLED)
    body = plain_job("mine", **{RELAY_LABEL: RELAY_DISABLED})
    created = await relay.submit(body, managed=False)
    assert "managedBy" not in created["spec"]
    await assert_ran_on_the_manager(relay, "mine")


async def test_a_job_with_its_own_managed_by_keeps_it(
    registered: dict[str, Any], relay: Relay
) -> None:
    await label_namespace(relay.manager, relay.namespace, RELAY_ENABLED)
    body = plain_job("theirs")
    body["spec"]["managedBy"] = "example.com/another"
    created = await relay.submit(body, managed=False)
    assert created["spec"]["managedBy"] == "example.com/another"


async def test_while_no_controller_answers_a_job_it_would_default_is_refused(
    registered: dict[str, Any],
    relay: Relay,
    controller: ControllerProcess,
    relay_fleet: FleetHandle,
) -> None:
    """failurePolicy Fail: stopped cleanly, the controller leaves its webhook registered,
    and a plain Job in an enabled namespace is refused, never run on the manager; once a
    controller registers again, the same Job is created and relayed. (Last: it restarts
    the module's controller.)"""
    await label_namespace(relay.manager, relay.namespace, RELAY_ENABLED)
    await controller.stop()
    try:
        with pytest.raises(ApiError) as refused:
            await relay.submit(plain_job("waits"), managed=False)
        assert 'failed calling webhook "namespaces.managedby.jobrelay.dev"' in str(refused.value)
        assert (await relay.manager.list(relay.resource, namespace=relay.namespace)).items == []
        # A workload that says who runs it is never sent (the webhooks' matchConditions),
        # so it is not refused: queue-labelled, in an enabled namespace, with its managedBy.
        own = plain_job("says-who-runs-it", **{QUEUE_LABEL: "any-queue"})
        own["spec"]["managedBy"] = RELAY
        kept = await relay.submit(own, managed=False)
        assert kept["spec"]["managedBy"] == RELAY
        await relay.manager.delete(relay.resource, "says-who-runs-it", namespace=relay.namespace)
    finally:
        await controller.start(relay.manager)
        await controller.wait_ready(relay.manager)
    await api_available(controller, relay_fleet)

    async def created() -> dict[str, Any] | None:
        # The apiserver reads the new registration (this run's address) within moments.
        try:
            return await relay.submit(plain_job("waits"), managed=False)
        except ApiError as error:
            if "failed calling webhook" in str(error):
                return None
            raise

    job = await eventually(created, timeout=30, what="the Job created through the new webhook")
    assert job["spec"]["managedBy"] == RELAY
    await assert_relayed(relay, "waits")
