"""The shape of a heterogeneous local fleet, read from YAML (`jobrelay fleet up --config FILE`).

```yaml
clusters:
  worker-1: {nodes: 2, cpu: "8", memory: 32Gi}
  worker-gpu: {nodes: 1, cpu: "16", memory: 64Gi, gpu: 4, labels: {accelerator: h100},
               nodeLabels: {nvidia.com/gpu.product: H100},
               taints: ["nvidia.com/gpu=present:NoSchedule"]}
  worker-2: {nodes: 2, autoscaler: {maxNodes: 4, cpu: "16", memory: 64Gi, delay: 20s}}
```

Every cluster listed but ``manager`` is a worker, named as listed; the manager keeps
:data:`DEFAULT` unless listed. Parsing and checking do no I/O (only :func:`load` reads
the file), and every error names the file, the cluster and the field, so that the CLI
can print it and stop before anything starts.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobrelay.localfleet.autoscaler_field import AutoscalerShape, parse_autoscaler
from jobrelay.placement import units
from jobrelay.placement.selectors import is_label_key, is_label_value
from jobrelay.placement.workload import Taint
from jobrelay.vocabulary.quantity import Unusable, read_quantity

MANAGER = "manager"
MAX_WORKERS = 20
MAX_NODES = 1000
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Labels the fleet itself puts on every node (KWOK finds its nodes by `type`).
FLEET_PREFIX = "fleet.jobrelay.dev/"
RESERVED_NODE_LABELS = frozenset({"type", "kubernetes.io/hostname"})

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_TAINT = re.compile(r"(?P<key>[^=:]+)(?:=(?P<value>[^:]*))?:(?P<effect>[^:]+)")
# Resources with a field of their own; `extendedResources` may not name them again.
_OWN_FIELDS = {units.CPU: "cpu", units.MEMORY: "memory", units.GPU: "gpu", units.PODS: "pods"}


class ShapeError(ValueError):
    """A fleet configuration that cannot be used; the message names file, cluster and field."""


@dataclass(frozen=True)
class ClusterShape:
    """One cluster: ``nodes`` identical KWOK nodes, and the WorkerCluster's labels."""

    nodes: int = 2
    cpu: str = "8"
    memory: str = "32Gi"
    gpu: int = 0
    pods: int = 110
    extended_resources: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    node_labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # A worker whose stand-in autoscaler adds nodes for ProvisioningRequests (autoscaler/).
    autoscaler: AutoscalerShape | None = None

    def capacity(self) -> dict[str, str]:
        """Each node's capacity (and allocatable), as the Node API writes it."""
        capacity = {units.CPU: self.cpu, units.MEMORY: self.memory, units.PODS: str(self.pods)}
        if self.gpu:
            capacity[units.GPU] = str(self.gpu)
        capacity.update({name: str(count) for name, count in self.extended_resources.items()})
        return capacity

    def to_config(self) -> dict[str, Any]:
        """This shape as the configuration file writes it (parses back to an equal shape)."""
        config: dict[str, Any] = {
            "nodes": self.nodes, "cpu": self.cpu, "memory": self.memory,
            "gpu": self.gpu, "pods": self.pods,
        }  # fmt: skip
        for key, value in (
            ("extendedResources", dict(self.extended_resources)),
            ("labels", dict(self.labels)),
            ("nodeLabels", dict(self.node_labels)),
            ("taints", [str(taint) for taint in self.taints]),
        ):
            if value:
                config[key] = value
        if self.autoscaler is not None:
            config["autoscaler"] = self.autoscaler.to_config()
        return config

    def describe(self) -> str:
        """One line for `fleet up` and `fleet status`."""
        resources = [f"{self.cpu} CPU", self.memory]
        if self.gpu:
            resources.append(f"{self.gpu} GPU")
        resources += [f"{count} {name}" for name, count in sorted(self.extended_resources.items())]
        nodes = "1 node" if self.nodes == 1 else f"{self.nodes} nodes"
        parts = [f"{nodes} x {' / '.join(resources)}"]
        for title, labels in (("labels", self.labels), ("node labels", self.node_labels)):
            if labels:
                parts.append(f"{title} " + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        if self.taints:
            parts.append("taints " + ",".join(str(taint) for taint in self.taints))
        if self.autoscaler is not None:
            parts.append(self.autoscaler.describe())
        return "; ".join(parts)


DEFAULT = ClusterShape()


@dataclass(frozen=True)
class FleetShape:
    """The workers by name (in the file's order), and the manager."""

    workers: Mapping[str, ClusterShape]
    manager: ClusterShape = DEFAULT

    def clusters(self) -> dict[str, ClusterShape]:
        return {MANAGER: self.manager, **self.workers}

    def to_config(self) -> dict[str, Any]:
        listed = {} if self.manager == DEFAULT else {MANAGER: self.manager.to_config()}
        listed.update({name: shape.to_config() for name, shape in self.workers.items()})
        return {"clusters": listed}


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; a cluster listed twice must be an error."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep)


def load(path: Path) -> FleetShape:
    """The fleet shape in the file at ``path``; ShapeError if it is unreadable or wrong."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ShapeError(f"{path}: cannot read it: {error}") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str) -> FleetShape:
    """The fleet shape a YAML document describes; ShapeError naming ``source`` if it is wrong."""
    try:
        document = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: builds plain data only
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or error
        raise ShapeError(f"{source}: not valid YAML{where}: {problem}") from None
    return parse(document, source)


def parse(document: Any, source: str) -> FleetShape:
    """The fleet shape of a loaded document (``{"clusters": {...}}``); ShapeError if wrong."""
    if not isinstance(document, Mapping):
        raise ShapeError(f"{source}: expected a mapping with the key 'clusters'")
    unknown = sorted(str(key) for key in document if key != "clusters")
    if unknown:
        raise ShapeError(f"{source}: unknown key {unknown[0]!r} (the only key is 'clusters')")
    listed = document.get("clusters")
    if not isinstance(listed, Mapping) or not listed:
        raise ShapeError(f"{source}: 'clusters' must map cluster names to their shapes")
    workers: dict[str, ClusterShape] = {}
    manager = DEFAULT
    for name, fields in listed.items():
        if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name):
            raise ShapeError(
                f"{source}: cluster name {name!r} is not a DNS label "
                "(lower-case letters, digits and '-', at most 63, starting and ending alphanumeric)"
            )
        shape = _cluster(fields, _Where(source, name))
        if name == MANAGER:
            manager = shape
        else:
            workers[name] = shape
    if not workers:
        raise ShapeError(f"{source}: lists no worker cluster (every cluster but 'manager' is one)")
    if len(workers) > MAX_WORKERS:
        raise ShapeError(f"{source}: lists {len(workers)} workers; at most {MAX_WORKERS}")
    return FleetShape(workers, manager)


@dataclass(frozen=True)
class _Where:
    source: str
    cluster: str

    def error(self, key: str, problem: str) -> ShapeError:
        return ShapeError(f"{self.source}: cluster {self.cluster!r}: field {key!r}: {problem}")


_FIELDS = (
    "nodes", "cpu", "memory", "gpu", "pods", "extendedResources", "labels", "nodeLabels", "taints",
    "autoscaler",
)  # fmt: skip


def _cluster(fields: Any, where: _Where) -> ClusterShape:
    if fields is None:
        fields = {}
    if not isinstance(fields, Mapping):
        raise ShapeError(
            f"{where.source}: cluster {where.cluster!r}: expected a mapping of {', '.join(_FIELDS)}"
        )
    for key in fields:
        if key not in _FIELDS:
            raise where.error(str(key), f"unknown field (known: {', '.join(_FIELDS)})")
    if where.cluster == MANAGER and "labels" in fields:
        raise where.error("labels", "the manager is no WorkerCluster; labels are for workers")
    if where.cluster == MANAGER and "autoscaler" in fields:
        raise where.error("autoscaler", "only a worker runs the stand-in autoscaler")
    autoscaler = None
    if "autoscaler" in fields:
        try:
            autoscaler = parse_autoscaler(fields["autoscaler"])
        except ValueError as error:
            raise where.error("autoscaler", str(error)) from None
    return ClusterShape(
        nodes=_integer(fields, "nodes", DEFAULT.nodes, 0, MAX_NODES, where),
        cpu=_quantity(fields, "cpu", units.CPU, DEFAULT.cpu, where),
        memory=_quantity(fields, "memory", units.MEMORY, DEFAULT.memory, where),
        gpu=_integer(fields, "gpu", DEFAULT.gpu, 0, None, where),
        pods=_integer(fields, "pods", DEFAULT.pods, 1, None, where),
        extended_resources=_extended(fields.get("extendedResources"), where),
        labels=_labels(fields.get("labels"), "labels", where),
        node_labels=_labels(fields.get("nodeLabels"), "nodeLabels", where),
        taints=_taints(fields.get("taints"), where),
        autoscaler=autoscaler,
    )


def _integer(
    fields: Mapping[str, Any], key: str, default: int, low: int, high: int | None, where: _Where
) -> int:
    value = fields.get(key, default)
    # YAML's `true` is an int to Python; a count never is.
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(key, f"{value!r} is not a whole number")
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise where.error(key, f"{value} is out of range ({bounds})")
    return value


def _quantity(
    fields: Mapping[str, Any], key: str, resource: str, default: str, where: _Where
) -> str:
    value = fields.get(key, default)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise where.error(key, f"{value!r} is not a Kubernetes quantity")
    text = str(value).strip()
    parsed = read_quantity(text)
    if not isinstance(parsed, Unusable) and parsed <= 0:
        raise where.error(key, f"{text!r} must be more than zero")
    try:
        amount = units.to_units(resource, text)
    except ValueError:
        raise where.error(
            key, f"{text!r} is not a Kubernetes quantity (e.g. 8, 500m, 32Gi)"
        ) from None
    if amount <= 0:
        raise where.error(key, f"{text!r} must be more than zero")
    return text


def _extended(value: Any, where: _Where) -> dict[str, int]:
    key = "extendedResources"
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(key, "expected a mapping of resource names to device counts")
    resources: dict[str, int] = {}
    for name, count in value.items():
        name = str(name)
        if name in _OWN_FIELDS:
            raise where.error(key, f"{name!r} has a field of its own: use {_OWN_FIELDS[name]!r}")
        domain = name.partition("/")[0]
        if (
            "/" not in name
            or not is_label_key(name)
            or domain == "kubernetes.io"
            or domain.endswith(".kubernetes.io")
        ):
            raise where.error(
                key,
                f"{name!r} is not an extended resource name (a domain-prefixed name outside "
                "kubernetes.io, e.g. example.com/fpga)",
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise where.error(
                key, f"the count of {name!r} must be a whole number >= 0, not {count!r}"
            )
        resources[name] = count
    return resources


def _labels(value: Any, key: str, where: _Where) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(key, "expected a mapping of label keys to values")
    labels: dict[str, str] = {}
    for label, text in value.items():
        label = str(label)
        if not is_label_key(label):
            raise where.error(key, f"{label!r} is not a valid label key")
        if label.startswith(FLEET_PREFIX) or (
            key == "nodeLabels" and label in RESERVED_NODE_LABELS
        ):
            raise where.error(key, f"{label!r} is set by the fleet itself")
        # Unquoted YAML turns `8` into a number and `yes` into true; a label is text.
        if not isinstance(text, str):
            raise where.error(key, f"the value of {label!r} must be a string (quote {text!r})")
        if not is_label_value(text):
            raise where.error(key, f"{text!r} is not a valid value for label {label!r}")
        labels[label] = text
    return labels


def parse_taint(text: str) -> Taint:
    """A taint in kubectl syntax, ``key=value:Effect`` or ``key:Effect``; ValueError if malformed."""
    found = _TAINT.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a taint (key=value:Effect or key:Effect)")
    key, value, effect = found["key"], found["value"] or "", found["effect"]
    if not is_label_key(key):
        raise ValueError(f"{text!r}: {key!r} is not a valid taint key")
    if not is_label_value(value):
        raise ValueError(f"{text!r}: {value!r} is not a valid taint value")
    if effect not in TAINT_EFFECTS:
        raise ValueError(f"{text!r}: the effect must be one of {', '.join(TAINT_EFFECTS)}")
    return Taint(key, value, effect)


def _taints(value: Any, where: _Where) -> tuple[Taint, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error("taints", 'expected a list such as ["key=value:NoSchedule"]')
    taints: list[Taint] = []
    for text in value:
        if not isinstance(text, str):
            raise where.error("taints", f"{text!r} is not a taint (key=value:Effect or key:Effect)")
        try:
            taint = parse_taint(text)
        except ValueError as error:
            raise where.error("taints", str(error)) from None
        # The apiserver refuses two taints with the same key and effect.
        if any((t.key, t.effect) == (taint.key, taint.effect) for t in taints):
            raise where.error("taints", f"{taint.key}:{taint.effect} is listed twice")
        taints.append(taint)
    return tuple(taints)
