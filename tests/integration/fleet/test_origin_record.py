"""The origin is defaulted once: a manager whose kube-system UID changes (rebuilt, or
restored from a backup that carries the controller's namespace) keeps the origin it
recorded, so its workers still know it. One apiserver (the fleet's manager), no
controller: the start-up step itself, as `jobrelay run` takes it."""

from __future__ import annotations

import dataclasses

import pytest

from jobrelay.controller.options import ControllerOptions
from jobrelay.controller.origin_startup import with_settled_origin
from jobrelay.fleet import origin_record
from jobrelay.fleet.origin_rules import origin_record_name
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import CONFIGMAPS
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

pytestmark = pytest.mark.integration


async def test_a_second_start_with_another_kube_system_keeps_the_recorded_origin(
    clients: dict[str, ApiClient], namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = clients["manager"]
    defaults = ControllerOptions()
    options = dataclasses.replace(
        defaults, workers=dataclasses.replace(defaults.workers, namespace=namespace)
    )
    kube_system = await origin_record.workerclusters.default_origin(manager)
    first = await with_settled_origin(manager, options)
    assert first.origin == kube_system
    record = await manager.get(
        CONFIGMAPS, origin_record_name(DEFAULT_CONTROLLER_NAME), namespace=namespace
    )
    assert record["data"] == {"origin": kube_system}

    # The manager rebuilt: its kube-system namespace has another UID now.
    async def rebuilt(_client: ApiClient) -> str:
        return "a-rebuilt-kube-system"

    monkeypatch.setattr(origin_record.workerclusters, "default_origin", rebuilt)
    again = await with_settled_origin(manager, options)
    assert again.origin == kube_system
    # The CLI reads the same record.
    assert (
        await origin_record.manager_origin(manager, namespace, DEFAULT_CONTROLLER_NAME)
        == kube_system
    )

    # The chart's `origin` value wins, and the record follows it.
    pinned = await with_settled_origin(manager, dataclasses.replace(options, origin="pinned-hq"))
    assert pinned.origin == "pinned-hq"
    assert (
        await origin_record.manager_origin(manager, namespace, DEFAULT_CONTROLLER_NAME)
        == "pinned-hq"
    )
