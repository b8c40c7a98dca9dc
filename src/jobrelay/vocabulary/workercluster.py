"""The values of a WorkerCluster's spec, read from its raw object.

``spec.cordoned``: no new workload is placed on the worker. ``spec.drain``
(implies cordoned): move its workloads elsewhere, ``NotStarted`` those whose
mirror has not started, ``All`` every one (counters carried over).
``spec.autoscaling``: the worker grows through ProvisioningRequests
(:mod:`jobrelay.vocabulary.autoscaling_spec`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.autoscaling_spec import WorkerAutoscaling


class DrainMode(enum.StrEnum):
    """The values of ``spec.drain`` (absent: not draining)."""

    NOT_STARTED = "NotStarted"
    ALL = "All"


def drain_mode(value: object) -> DrainMode | None:
    """``spec.drain`` as a mode; None when absent or not one the CRD allows."""
    try:
        return DrainMode(str(value)) if value else None
    except ValueError:  # the CRD's enum rules this out; an old or hand-made object may not
        return None


@dataclass(frozen=True, slots=True)
class WorkerClusterSpec:
    """What an operator asks of one worker: cordoned, draining (and how)."""

    cordoned: bool = False
    drain: DrainMode | None = None
    # spec.autoscaling: the worker grows through ProvisioningRequests (None: it does not).
    autoscaling: WorkerAutoscaling | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any] | None) -> WorkerClusterSpec:
        spec = (obj or {}).get("spec")
        if not isinstance(spec, Mapping):
            return cls()
        return cls(
            cordoned=bool(spec.get("cordoned")),
            drain=drain_mode(spec.get("drain")),
            autoscaling=WorkerAutoscaling.of(spec),
        )

    @property
    def takes_new_workloads(self) -> bool:
        """A drain cordons too: a workload moved away must not be placed back."""
        return not self.cordoned and self.drain is None


def cordon_patch() -> dict[str, Any]:
    return {"spec": {"cordoned": True}}


def uncordon_patch() -> dict[str, Any]:
    """Cordon off and any drain cancelled (null deletes the field in a merge patch)."""
    return {"spec": {"cordoned": False, "drain": None}}


def drain_patch(mode: DrainMode) -> dict[str, Any]:
    """A drain cordons too: a workload moved away must not be placed back."""
    return {"spec": {"cordoned": True, "drain": mode.value}}
