"""The origin record: read by the controller at start and by the CLI, written by the
controller (create-if-absent). The rules are :mod:`jobrelay.fleet.origin_rules`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from jobrelay.fleet import workerclusters
from jobrelay.fleet.origin_rules import (
    ORIGIN_RECORD_KEY,
    OriginRecordError,
    OriginWrite,
    origin_record_manifest,
    origin_record_name,
    recorded_origin,
    settled_origin,
)
from jobrelay.fleet.workerclusters import RegistryError
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS
from jobrelay.vocabulary.names import FIELD_MANAGER

__all__ = ["manager_origin", "read_origin_record", "settle_origin"]

_log = logging.getLogger(__name__)


async def read_origin_record(client: ApiClient, namespace: str, controller_name: str) -> str | None:
    """The recorded origin, or None when nothing is recorded (no ConfigMap yet)."""
    name = origin_record_name(controller_name)
    try:
        config_map: dict[str, Any] | None = await client.get(CONFIGMAPS, name, namespace=namespace)
    except ApiError as error:
        if not error.is_not_found:
            raise RegistryError(
                f"cannot read the origin record, ConfigMap {namespace}/{name} ({error}): grant "
                "`get` on it, or name the origin with --origin"
            ) from error
        config_map = None
    try:
        return recorded_origin(config_map, f"{namespace}/{name}")
    except OriginRecordError as error:
        raise RegistryError(str(error)) from error


async def settle_origin(
    client: ApiClient,
    namespace: str,
    controller_name: str,
    explicit: str,
    *,
    derive: Callable[[ApiClient], Awaitable[str]] | None = None,
) -> str:
    """The origin this controller uses, recorded in its namespace (see origin_rules).

    Two replicas starting at once may both find no record: the one whose create loses
    (AlreadyExists) reads the winner's, so both use one origin.
    """
    name = origin_record_name(controller_name)
    recorded = await read_origin_record(client, namespace, controller_name)
    derive = derive or workerclusters.default_origin  # kube-system's UID
    derived = None if explicit or recorded is not None else await derive(client)
    settled = settled_origin(explicit, recorded, derived)
    if settled.warning:
        _log.warning(settled.warning, extra={"event": "origin-replaced"})
    try:
        if settled.write is OriginWrite.CREATE:
            await client.create(
                CONFIGMAPS,
                origin_record_manifest(name, namespace, settled.origin),
                field_manager=FIELD_MANAGER,
            )
        elif settled.write is OriginWrite.REPLACE:
            await client.patch(
                CONFIGMAPS, name, {"data": {ORIGIN_RECORD_KEY: settled.origin}},
                namespace=namespace, patch_type=PatchType.MERGE, field_manager=FIELD_MANAGER,
            )  # fmt: skip
    except ApiError as error:
        if error.is_already_exists:  # recorded meanwhile: settled again, against it
            return await settle_origin(client, namespace, controller_name, explicit, derive=derive)
        raise RegistryError(
            f"cannot record the origin {settled.origin} in ConfigMap {namespace}/{name} "
            f"({error}): grant `create` and `patch` on it (the chart does)"
        ) from error
    return settled.origin


async def manager_origin(client: ApiClient, namespace: str, controller_name: str) -> str:
    """The origin the CLI assumes when none is given: the controller's record, else (no
    controller has started yet) kube-system's UID, as the controller will record it."""
    recorded = await read_origin_record(client, namespace, controller_name)
    return recorded if recorded is not None else await workerclusters.default_origin(client)
