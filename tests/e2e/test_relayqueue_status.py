"""The controller reads the fleet's RelayQueues and says on each one's status whether it
uses it: ``Valid=True``, or ``Valid=False`` with why. A queue the CRD stores but the
controller cannot use (``In`` without values: the CRD's schema does not check that
Kubernetes rule) is ignored with its reason, never a crash."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import RELAY_QUEUES
from tests.e2e.support import ControllerProcess
from tests.kubetools import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
async def queue_names(clients: dict[str, ApiClient]) -> AsyncIterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        try:
            await clients["manager"].delete(RELAY_QUEUES, name)
        except ApiError as error:
            if not error.is_not_found:
                raise


async def valid_condition(manager: ApiClient, name: str) -> dict[str, Any] | None:
    queue = await manager.get(RELAY_QUEUES, name)
    for condition in (queue.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Valid":
            return dict(condition)
    return None


async def test_each_queue_says_whether_the_controller_uses_it(
    controller: ControllerProcess, clients: dict[str, ApiClient], queue_names: list[str]
) -> None:
    manager = clients["manager"]
    good, odd = f"good-{uuid.uuid4().hex[:6]}", f"odd-{uuid.uuid4().hex[:6]}"
    queue_names += [good, odd]
    selector = {"matchExpressions": [{"key": "team", "operator": "In"}]}
    for name, spec in (
        (good, {"nominalQuota": {"cpu": "4"}}),
        (odd, {"namespaceSelector": selector}),
    ):
        await manager.create(RELAY_QUEUES, {
            "apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue",
            "metadata": {"name": name}, "spec": spec,
        })  # fmt: skip

    accepted = await eventually(lambda: valid_condition(manager, good), what=f"{good} Valid")
    assert accepted["status"] == "True", accepted
    refused = await eventually(lambda: valid_condition(manager, odd), what=f"{odd} Valid")
    assert refused["status"] == "False" and refused["reason"] == "InvalidSpec", refused
    assert "'team' In needs values" in refused["message"], refused
    assert controller.running
