"""The ``autoscaler`` field of a worker in a fleet configuration: the worker runs the
stand-in autoscaler with these flags (read and checked here, without I/O).

```yaml
clusters:
  worker-2: {nodes: 2, autoscaler: {maxNodes: 4, cpu: "16", memory: 64Gi, delay: 20s}}
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.placement.units import CPU, MEMORY, to_units
from jobrelay.vocabulary.go_durations import parse_go_duration
from jobrelay.vocabulary.provisioning_api import BEST_EFFORT_ATOMIC_SCALE_UP

AUTOSCALER_FIELDS = ("maxNodes", "cpu", "memory", "gpu", "delay", "refuse", "booking")
MAX_ADDED_NODES = 100


@dataclass(frozen=True)
class AutoscalerShape:
    """The stand-in autoscaler of one worker: at most ``max_nodes`` added nodes of this
    shape, each scale-up ``delay`` after the request; ``refuse``: refuse every request."""

    max_nodes: int = 4
    cpu: str = "16"
    memory: str = "64Gi"
    gpu: int = 0
    delay: str = "20s"
    refuse: str | None = None
    booking: str | None = None  # a duration: BookingExpired when no pod consumes it so long

    def flags(self) -> list[str]:
        """The stand-in's command-line flags (see ``python -m jobrelay.localfleet.autoscaler``)."""
        flags = [f"--max-nodes={self.max_nodes}", f"--cpu={self.cpu}",
                 f"--memory={self.memory}", f"--gpu={self.gpu}", f"--delay={self.delay}"]  # fmt: skip
        if self.booking is not None:
            flags.append(f"--booking={self.booking}")
        return flags if self.refuse is None else [*flags, f"--refuse={self.refuse}"]

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"maxNodes": self.max_nodes, "cpu": self.cpu,
                                  "memory": self.memory, "gpu": self.gpu, "delay": self.delay}  # fmt: skip
        if self.refuse is not None:
            config["refuse"] = self.refuse
        if self.booking is not None:
            config["booking"] = self.booking
        return config

    def worker_cluster_autoscaling(self) -> dict[str, Any] | None:
        """The worker's ``spec.autoscaling``, as the admin of a real one would set it for
        this autoscaler; None when it may add no node."""
        if self.max_nodes == 0:
            return None
        shape = {"cpu": self.cpu, "memory": self.memory, "gpu": self.gpu, "count": self.max_nodes}
        return {"provisioningClassName": BEST_EFFORT_ATOMIC_SCALE_UP, "nodeShapes": [shape]}

    def describe(self) -> str:
        shape = f"{self.cpu} CPU / {self.memory}" + (f" / {self.gpu} GPU" if self.gpu else "")
        refusing = ", refusing" if self.refuse is not None else ""
        return f"autoscaler up to {self.max_nodes} x {shape} after {self.delay}{refusing}"


def parse_autoscaler(value: Any) -> AutoscalerShape:
    """The field's value as a shape; ValueError saying which key is wrong and why."""
    if value is None:
        return AutoscalerShape()
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping of {', '.join(AUTOSCALER_FIELDS)}")
    for key in value:
        if key not in AUTOSCALER_FIELDS:
            raise ValueError(f"unknown key {key!r} (known: {', '.join(AUTOSCALER_FIELDS)})")
    default = AutoscalerShape()
    refuse = value.get("refuse")
    if refuse is not None and not isinstance(refuse, str):
        raise ValueError(f"'refuse' is the refusal's message, not {refuse!r}")
    return AutoscalerShape(
        max_nodes=_count(value, "maxNodes", default.max_nodes, MAX_ADDED_NODES),
        cpu=_quantity(value, "cpu", CPU, default.cpu),
        memory=_quantity(value, "memory", MEMORY, default.memory),
        gpu=_count(value, "gpu", default.gpu, None),
        delay=_delay(value.get("delay", default.delay), "delay"),
        refuse=refuse,
        booking=None if value.get("booking") is None else _delay(value["booking"], "booking"),
    )


def _count(value: Mapping[str, Any], key: str, default: int, high: int | None) -> int:
    found = value.get(key, default)
    if isinstance(found, bool) or not isinstance(found, int) or found < 0:
        raise ValueError(f"{key!r}: {found!r} is not a whole number >= 0")
    if high is not None and found > high:
        raise ValueError(f"{key!r}: {found} is more than {high}")
    return found


def _quantity(value: Mapping[str, Any], key: str, resource: str, default: str) -> str:
    text = str(value.get(key, default)).strip()
    try:
        if to_units(resource, text) > 0:
            return text
    except ValueError:
        pass
    raise ValueError(f"{key!r}: {text!r} is not a quantity above zero (e.g. 16, 64Gi)")


def _delay(found: Any, key: str) -> str:
    text = str(found).strip()
    try:
        parse_go_duration(text)
    except ValueError:
        raise ValueError(f"{key!r}: {text!r} is not a duration (e.g. 20s, 1m)") from None
    return text
