"""Which origin a manager uses, and what its origin record must say (pure).

The origin names a management cluster on every mirror, worker account, admission
policy and namespace label. It must outlive the manager's own objects: a manager
rebuilt from a backup has a new kube-system namespace, so a default read from its UID
on every start would name a stranger. So the origin is ``--origin`` (the chart's
``origin`` value) when given, else the one recorded on the first start (a ConfigMap
in the controller's namespace, which a backup of that namespace carries), else, once,
kube-system's UID, recorded from then on.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.leases import lease_name_for
from jobrelay.vocabulary.names import origin_problem

__all__ = [
    "ORIGIN_RECORD_KEY",
    "OriginRecordError",
    "OriginWrite",
    "SettledOrigin",
    "origin_record_manifest",
    "origin_record_name",
    "recorded_origin",
    "settled_origin",
]

ORIGIN_RECORD_KEY = "origin"
_RECORD_SUFFIX = "-origin"


class OriginRecordError(ValueError):
    """The origin record holds something that cannot be an origin; the message says the fix."""


class OriginWrite(enum.Enum):
    """What the controller writes to the origin record at start."""

    NOTHING = "nothing"  # it says the origin in use
    CREATE = "create"  # none yet: this start records it (create-if-absent)
    REPLACE = "replace"  # --origin names another one: the record follows the flag


@dataclass(frozen=True)
class SettledOrigin:
    """The origin to use, what to write, and a warning for the log (None: nothing odd)."""

    origin: str
    write: OriginWrite
    warning: str | None = None


def origin_record_name(controller_name: str) -> str:
    """The ConfigMap recording a controller's origin: its Lease's name plus ``-origin``
    (``jobrelay.dev/relay`` -> ``jobrelay-relay-origin``)."""
    return lease_name_for(controller_name) + _RECORD_SUFFIX


def recorded_origin(config_map: Mapping[str, Any] | None, name: str) -> str | None:
    """The origin a record holds; None when there is no record (or it holds no origin
    key). A value that is no origin is an error naming the fix: guessing a new origin
    would turn every mirror into a stranger's."""
    if config_map is None:
        return None
    data = config_map.get("data") or {}
    value = data.get(ORIGIN_RECORD_KEY) if isinstance(data, Mapping) else None
    if value is None:
        return None
    if not isinstance(value, str) or (problem := origin_problem(value)):
        what = problem if isinstance(value, str) else f"{type(value).__name__} is not a string"
        raise OriginRecordError(
            f"ConfigMap {name} records no usable origin ({what}): set data.{ORIGIN_RECORD_KEY} "
            "to the origin the workers know (docs/operations.md, Disaster recovery), or pass "
            "--origin"
        )
    return value


def settled_origin(explicit: str, recorded: str | None, derived: str | None) -> SettledOrigin:
    """The origin to use: ``explicit`` (--origin) wins, then ``recorded``, then
    ``derived`` (kube-system's UID, read only when both others are empty).

    Raises ValueError when none is known: the caller reads ``derived`` only then.
    """
    if explicit:
        if recorded is None:
            return SettledOrigin(explicit, OriginWrite.CREATE)
        if recorded == explicit:
            return SettledOrigin(explicit, OriginWrite.NOTHING)
        return SettledOrigin(
            explicit,
            OriginWrite.REPLACE,
            f"--origin {explicit} replaces the recorded origin {recorded}: mirrors, worker "
            f"accounts and namespace labels of {recorded} are no longer this manager's",
        )
    if recorded is not None:
        return SettledOrigin(recorded, OriginWrite.NOTHING)
    if derived:
        return SettledOrigin(derived, OriginWrite.CREATE)
    raise ValueError("no origin: neither given, recorded nor derived")


def origin_record_manifest(name: str, namespace: str, origin: str) -> dict[str, Any]:
    """The origin record's ConfigMap (made by the controller, not by Helm: a template
    would need ``lookup`` to keep a defaulted value, and renders must stay stable)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "jobrelay"},
            "annotations": {
                "jobrelay.dev/purpose": (
                    "this management cluster's origin: back it up with the namespace and "
                    "restore it before the controller starts (docs/operations.md)"
                ),
            },
        },
        "data": {ORIGIN_RECORD_KEY: origin},
    }
