"""The controller's origin, settled once at start (before any informer selects mirrors
by it): --origin, else the record in its namespace, else kube-system's UID, recorded."""

from __future__ import annotations

import dataclasses

from jobrelay.controller.kind_resolution import ConfigurationError
from jobrelay.controller.options import ControllerOptions
from jobrelay.fleet import origin_record, workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError

__all__ = ["with_settled_origin"]


async def with_settled_origin(manager: ApiClient, options: ControllerOptions) -> ControllerOptions:
    """``options`` with the origin this start settled on (and recorded)."""
    namespace, name = options.workers.namespace, options.controller_name
    try:
        # The record lives in the controller's namespace: made first when missing.
        await workerclusters.ensure_namespace(manager, namespace)
        origin = await origin_record.settle_origin(manager, namespace, name, options.origin)
    except workerclusters.RegistryError as error:
        raise ConfigurationError(str(error)) from error
    except ApiError as error:
        raise ConfigurationError(f"cannot make namespace {namespace}: {error}") from error
    return dataclasses.replace(options, origin=origin)
