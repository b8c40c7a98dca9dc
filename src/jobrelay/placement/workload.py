"""What a workload asks of a cluster: its pod groups, and the Job's choice of clusters.

A pod group is ``count`` pods that must run at once (a Job's parallelism capped by
its completions; times the replicas of a JobSet's replicated Job), each requesting
the same resources and restricted to the same nodes (nodeSelector, required node
affinity, tolerations). Malformed input is returned as :class:`Invalid`, never raised:
the caller shows its text to the user.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jobrelay.dependencies.template_references import claim_names
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.pods import pod_requests
from jobrelay.placement.selectors import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    parse_selector,
)
from jobrelay.placement.units import resources_of
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    CLUSTER_SELECTOR_ANNOTATION,
    CLUSTERS_ANNOTATION,
    PLACEMENT_ANNOTATION,
)
from jobrelay.vocabulary.quantity import QuantityError

# Taint effects that keep a pod off a node; PreferNoSchedule only discourages.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# The reasons of the Warning Events an unplaceable workload gets.
INVALID_PLACEMENT = "InvalidPlacement"
INVALID_QUANTITY = "InvalidQuantity"


class Strategy(StrEnum):
    SPREAD = "spread"
    PACK = "pack"
    ORDERED = "ordered"


@dataclass(frozen=True, slots=True)
class Invalid:
    """Why a workload or an annotation cannot be placed: shown to the user as is, in a
    Warning Event with this reason."""

    message: str
    reason: str = INVALID_PLACEMENT

    def __str__(self) -> str:
        return self.message


# -- tolerations and node affinity ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod's toleration, matched as Kubernetes' ToleratesTaint does (an empty key with
    ``Exists`` tolerates every taint; an empty effect every effect)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first taint that keeps a pod with these tolerations off the node, if any."""
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Label requirements and ``metadata.name`` requirements that must all hold."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        # An empty term matches no node (as in Kubernetes).
        if not self.expressions and not self.fields:
            return False
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches({"metadata.name": name}) for r in self.fields
        )


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """``requiredDuringSchedulingIgnoredDuringExecution``: any one term must match."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return any(term.matches(name, labels) for term in self.terms)

    @property
    def names_nodes(self) -> bool:
        """Whether a term depends on the node's name (then shapes of nodes cannot share
        one answer)."""
        return any(term.fields for term in self.terms)


# -- pod groups ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroup:
    name: str
    count: int
    # Per pod, in placement.units' integers; zero requests are left out.
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: NodeAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()

    def allows(self, name: str, labels: Mapping[str, str], taints: Sequence[Taint]) -> str | None:
        """Why a pod of this group cannot go on such a node (None: it can, resources aside)."""
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return "nodeSelector"
        if self.affinity is not None and not self.affinity.matches(name, labels):
            return "node affinity"
        taint = untolerated(taints, self.tolerations)
        if taint is not None:
            return f"taint {taint}"
        return None


def _requirement(raw: Any, where: str) -> Requirement:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not an object")
    try:
        operator = Operator(str(raw.get("operator")))
    except ValueError as error:
        raise ValueError(f"{where}: unknown operator {raw.get('operator')!r}") from error
    values = frozenset(str(v) for v in raw.get("values") or [])
    return Requirement(str(raw.get("key", "")), operator, values)


def _affinity(pod_spec: JsonObj) -> NodeAffinity | None:
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    terms = []
    for index, term in enumerate(required.get("nodeSelectorTerms") or []):
        where = f"nodeSelectorTerms[{index}]"
        terms.append(
            NodeSelectorTerm(
                tuple(
                    _requirement(r, f"{where}.matchExpressions")
                    for r in term.get("matchExpressions") or []
                ),
                tuple(
                    _requirement(r, f"{where}.matchFields") for r in term.get("matchFields") or []
                ),
            )
        )
    return NodeAffinity(tuple(terms))


def _tolerations(pod_spec: JsonObj) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=str(t.get("key") or ""),
            operator=str(t.get("operator") or "Equal"),
            value=str(t.get("value") or ""),
            effect=str(t.get("effect") or ""),
        )
        for t in pod_spec.get("tolerations") or []
        if isinstance(t, dict)
    )


def pod_group(name: str, count: int, pod_spec: JsonObj) -> PodGroup:
    """The group of ``count`` pods made from ``pod_spec``; ValueError if malformed."""
    effective = pod_requests(pod_spec)
    try:
        requests = resources_of(effective)
    except QuantityError as error:
        # Each container's quantity was usable; their sum is not.
        raise error.within(f"pod template {name[:63]!r}, all containers together") from None
    return PodGroup(
        name=name,
        count=count,
        requests={r: q for r, q in requests.items() if q > 0},
        node_selector={str(k): str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items()},
        affinity=_affinity(pod_spec),
        tolerations=_tolerations(pod_spec),
    )


def pod_groups(kind: WorkloadKind, obj: JsonObj) -> tuple[PodGroup, ...] | Invalid:
    """The pod groups of a workload, as its kind counts them (empty: the kind cannot tell)."""
    try:
        sets, templates = kind.pod_sets(obj), kind.pod_templates(obj)
        if len(sets) == len(templates):
            return tuple(
                pod_group(s.name, s.count, t.get("spec") or {})
                for s, t in zip(sets, templates, strict=True)
            )
        # The kind cannot pair its counts with templates: requests and nodeSelector only.
        return tuple(
            PodGroup(
                s.name,
                s.count,
                {r: q for r, q in resources_of(s.requests).items() if q > 0},
                dict(s.node_selector),
            )
            for s in sets
        )
    except QuantityError as error:
        return Invalid(f"cannot read the pods' requests: {error}", INVALID_QUANTITY)
    except (ValueError, TypeError, AttributeError) as error:
        return Invalid(f"cannot read the pods' requests: {error}")


# -- the Job's choice and the namespace's policy ------------------------------------------


@dataclass(frozen=True, slots=True)
class Choice:
    """Which clusters may run a workload, and how to pick among them.

    Used both for a Job's own choice and for a namespace's policy (set by an admin;
    a Job only narrows it). ``clusters`` None: any cluster; else an allow-list, in
    the order ``ordered`` placement tries it.
    """

    clusters: tuple[str, ...] | None = None
    selector: Selector | None = None
    strategy: Strategy | None = None

    def allows(self, name: str, labels: Mapping[str, str]) -> bool:
        return (self.clusters is None or name in self.clusters) and (
            self.selector is None or self.selector.matches(labels)
        )


# A namespace's policy is a choice an admin made; the name says whose it is.
Policy = Choice


def read_choice(annotations: Mapping[str, str] | None) -> Choice | Invalid:
    """The choice the ``jobrelay.dev/clusters``, ``jobrelay.dev/cluster-selector`` and
    ``jobrelay.dev/placement`` annotations make (absent: no restriction)."""
    annotations = annotations or {}
    clusters: tuple[str, ...] | None = None
    selector: Selector | None = None
    strategy: Strategy | None = None
    if CLUSTERS_ANNOTATION in annotations:
        names = [n.strip() for n in str(annotations[CLUSTERS_ANNOTATION]).split(",")]
        if not all(names):
            return Invalid(
                f"annotation {CLUSTERS_ANNOTATION}: expected cluster names separated by "
                f"commas, got {annotations[CLUSTERS_ANNOTATION]!r}"
            )
        clusters = tuple(dict.fromkeys(names))  # first mention wins the order
    if CLUSTER_SELECTOR_ANNOTATION in annotations:
        try:
            selector = parse_selector(str(annotations[CLUSTER_SELECTOR_ANNOTATION]))
        except SelectorError as error:
            return Invalid(f"annotation {CLUSTER_SELECTOR_ANNOTATION}: {error}")
    if PLACEMENT_ANNOTATION in annotations:
        value = str(annotations[PLACEMENT_ANNOTATION]).strip()
        try:
            strategy = Strategy(value)
        except ValueError:
            known = "|".join(s.value for s in Strategy)
            return Invalid(f"annotation {PLACEMENT_ANNOTATION}: expected {known}, got {value!r}")
    return Choice(clusters, selector, strategy)


@dataclass(frozen=True, slots=True)
class Workload:
    """Everything placement needs to know of one workload."""

    groups: tuple[PodGroup, ...]
    choice: Choice = Choice()
    # Where its mirror goes on a worker (the same namespace); "" when not judged.
    namespace: str = ""
    # The PersistentVolumeClaims its pods mount: only a worker holding them takes it.
    claims: tuple[str, ...] = ()
    # Its ``likeness``, made on first use (neither compared nor shown).
    _likeness: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def likeness(self) -> str:
        """A text equal for equal workloads (its repr, which shows every field), made
        once per object and interned: a pass over a held backlog asks it of thousands of
        workloads made from a few templates, each kept from pass to pass."""
        made = self._likeness
        if made is None:
            made = sys.intern(repr(self))
            object.__setattr__(self, "_likeness", made)  # frozen: set once, as made
        return made

    @property
    def demand(self) -> dict[str, int]:
        """What all its pods request together."""
        total: dict[str, int] = {}
        for group in self.groups:
            for resource, quantity in group.requests.items():
                total[resource] = total.get(resource, 0) + quantity * group.count
        return total


def read_workload(kind: WorkloadKind, obj: JsonObj) -> Workload | Invalid:
    """A management object as placement sees it: its pod groups and its annotations."""
    groups = pod_groups(kind, obj)
    if isinstance(groups, Invalid):
        return groups
    choice = read_choice(Meta(obj).annotations)
    if isinstance(choice, Invalid):
        return choice
    return Workload(groups, choice, Meta(obj).namespace or "", claims_of(kind, obj))


def claims_of(kind: WorkloadKind, obj: JsonObj) -> tuple[str, ...]:
    """The PersistentVolumeClaims a workload's pod templates mount (none when its
    templates cannot be read: their pod groups were, and say what is wrong)."""
    try:
        return claim_names(kind.pod_templates(obj))
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return ()
