"""The RelayQueue CRD against a real apiserver (the fleet's manager): the issue's queue is
accepted with its defaults filled in, every invalid one (weight <= 0, unparsable
quantities, unknown enum values, a malformed selector) is refused by validation, and
the controller's status writes (merge patch of the status subresource) are accepted.

No controller runs: the queues are created and read back here, by unique names."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.admission.queue_model import QueueSpec, Reclaim
from jobrelay.admission.queue_specs import read_queue
from jobrelay.fleet import relayqueues, workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import RELAY_QUEUES
from tests.conftest import FleetHandle

pytestmark = pytest.mark.integration


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        # `fleet up` installs it; applied again (idempotent) for a fleet kept from before.
        await workerclusters.install_crd(client, manifest=relayqueues.crd_manifest())
        yield client


@pytest.fixture
async def names(manager: ApiClient) -> AsyncIterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        try:
            await manager.delete(RELAY_QUEUES, name)
        except ApiError as error:
            if not error.is_not_found:
                raise


def relay_queue(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def unique(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:6]}"


async def test_the_issues_queue_is_accepted_with_its_defaults(
    manager: ApiClient, names: list[str]
) -> None:
    name = unique("team-a")
    names.append(name)
    spec = {
        "weight": 1,
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "queueingStrategy": "BestEffortFIFO",
        "nominalQuota": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"},
        "borrowingLimit": {"cpu": "16"},
        "preemption": {"reclaimWithinFleet": "Any"},
    }
    created = await manager.create(RELAY_QUEUES, relay_queue(name, spec))
    assert created["spec"]["preemption"] == {"reclaimWithinFleet": "Any", "withinQueue": "Never"}
    read = read_queue(created)
    assert isinstance(read, QueueSpec) and read.reclaim is Reclaim.ANY
    assert read.nominal == {"cpu": 32_000, "memory": 128 * 2**30, "nvidia.com/gpu": 4}
    # Integers are quantities too; an empty spec gets weight 1 and BestEffortFIFO.
    bare = unique("bare")
    names.append(bare)
    defaults = await manager.create(RELAY_QUEUES, relay_queue(bare, {"nominalQuota": {"cpu": 4}}))
    assert defaults["spec"]["weight"] == 1
    assert defaults["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert read_queue(defaults) == QueueSpec(name=bare, nominal={"cpu": 4000})


async def test_the_controllers_status_is_accepted(manager: ApiClient, names: list[str]) -> None:
    name = unique("status")
    names.append(name)
    await manager.create(RELAY_QUEUES, relay_queue(name, {}))
    status = {
        "pending": 3, "admitted": 10, "usage": {"cpu": "40"}, "demand": {"cpu": "52500m"},
        "fairShare": 0.25, "actualShare": 0.3125,
        "conditions": [{"type": "Valid", "status": "True", "reason": "Valid", "message": "ok",
                        "lastTransitionTime": "2026-11-26T17:00:00Z"}],
    }  # fmt: skip
    written = await manager.patch(RELAY_QUEUES, name, {"status": status}, subresource="status")
    assert written["status"] == status
    # A figure no longer wanted is removed with null (an invalid queue's status).
    cleared = await manager.patch(
        RELAY_QUEUES, name, {"status": {"pending": None, "fairShare": None}}, subresource="status"
    )
    assert "pending" not in cleared["status"] and "fairShare" not in cleared["status"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"weight": 0}, "spec.weight"),
        ({"weight": -1}, "spec.weight"),
        ({"weight": "heavy"}, "spec.weight"),
        ({"nominalQuota": {"cpu": "lots"}}, "spec.nominalQuota.cpu"),
        ({"nominalQuota": {"memory": "1GB"}}, "spec.nominalQuota.memory"),
        ({"borrowingLimit": {"cpu": "-1"}}, "spec.borrowingLimit.cpu"),
        ({"borrowingLimit": {"cpu": -1}}, "spec.borrowingLimit.cpu"),
        ({"queueingStrategy": "LIFO"}, "spec.queueingStrategy"),
        ({"preemption": {"reclaimWithinFleet": "Always"}}, "spec.preemption.reclaimWithinFleet"),
        ({"preemption": {"withinQueue": "Any"}}, "spec.preemption.withinQueue"),
        ({"namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Is"}]}},
         "spec.namespaceSelector.matchExpressions[0].operator"),
    ],
)  # fmt: skip
async def test_an_invalid_queue_is_refused_by_validation(
    manager: ApiClient, names: list[str], spec: dict[str, Any], field: str
) -> None:
    name = unique("invalid")
    names.append(name)  # deleted should the apiserver ever accept it
    with pytest.raises(ApiError) as refused:
        await manager.create(RELAY_QUEUES, relay_queue(name, spec))
    assert refused.value.code == 422 and refused.value.is_invalid, refused.value
    assert field in refused.value.message, refused.value.message
