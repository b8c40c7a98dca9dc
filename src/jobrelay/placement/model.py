"""The interfaces of placement: a cluster as a decision sees it, the request being
placed, and the two kinds of rule, :class:`Filter` and :class:`Score`.

A filter says why a cluster cannot take a workload (or None); a score ranks the
clusters every filter let through (higher wins; ties go to the name that sorts
first). Adding a rule is one small module with one class (see ``filters/`` and
``scores/``) and one line in its package's list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.claims import WorkerClaims
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.placement.nodefit import Fit
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.placement.workload import Choice, Strategy, Workload


@dataclass(frozen=True, slots=True)
class Cluster:
    """One worker cluster: its WorkerCluster's state and labels, and its capacity
    (None until its informers have synced)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    connected: bool = True
    lost: bool = False
    cordoned: bool = False
    draining: bool = False
    capacity: WorkerCapacity | None = None
    # Its nodes cannot be read (RBAC): it is placed on without a fit check, last among
    # those that fit, rather than never.
    blind: bool = False
    # Its unfinished mirrors plus placements not visible yet: breaks ties between
    # clusters that score the same (blind ones above all).
    load: int = 0
    # Its namespaces and which are open to this manager (None: not judged).
    namespaces: WorkerNamespaces | None = None
    # The workload's dependencies (``configmap/settings``) held there by objects jobrelay
    # did not make: never overwritten, so the workload cannot run there.
    foreign_dependencies: tuple[str, ...] = ()
    # Its PersistentVolumeClaims, for workloads that mount some (None: not judged).
    claims: WorkerClaims | None = None


class Request:
    """One decision's question: this workload, under this namespace policy. Fits are
    computed at most once per cluster and shared by the rules that read them."""

    def __init__(
        self,
        workload: Workload,
        policy: Choice | None = None,
        excluded: Mapping[str, str] | None = None,
        misfits: dict[tuple[str, str], Fit] | None = None,
    ) -> None:
        self.workload = workload
        self.policy = policy or Choice()
        # Fits that failed, by (cluster, the workload's pods), shared by the decisions of
        # one pass over clusters whose room only shrinks meanwhile: they fail again.
        self._misfits = misfits
        self._pods = repr(workload.groups) if misfits is not None else ""
        # Clusters this decision may not use, each with why (the controller's own
        # reasons: the workload is leaving it, it holds a namesake jobrelay did not make).
        self.excluded: Mapping[str, str] = excluded or {}
        self._fits: dict[str, Fit | None] = {}

    @property
    def strategy(self) -> Strategy:
        """The Job's choice of score, else its namespace's, else spread."""
        return self.workload.choice.strategy or self.policy.strategy or Strategy.SPREAD

    @property
    def order(self) -> tuple[str, ...]:
        """The spill-over order: the Job's allow-list, else its namespace's."""
        return self.workload.choice.clusters or self.policy.clusters or ()

    def fit(self, cluster: Cluster) -> Fit | None:
        """Where the workload's pods would go on ``cluster`` now (None: capacity unknown)."""
        if cluster.name in self._fits:
            return self._fits[cluster.name]
        fit: Fit | None = None
        if cluster.capacity is not None:
            known = (cluster.name, self._pods)
            fit = self._misfits.get(known) if self._misfits is not None else None
            if fit is None:
                fit = cluster.capacity.fit(self.workload.groups)
                if self._misfits is not None and not fit.fits:
                    self._misfits[known] = fit
        self._fits[cluster.name] = fit
        return fit


class Filter(Protocol):
    name: str
    # Whether a rejection stands whatever the cluster's state or load (the Job's or
    # the namespace's choice): such clusters do not count when asking "could it ever fit?".
    permanent: bool

    def reject(self, request: Request, cluster: Cluster) -> str | NotKnownYet | None:
        """Why ``cluster`` cannot take the request now (:class:`NotKnownYet` when that
        cannot be told yet); None if it can."""
        ...


class Score(Protocol):
    name: Strategy

    def score(self, request: Request, cluster: Cluster) -> float:
        """How much ``cluster`` is preferred (higher wins); only called on clusters every
        filter let through."""
        ...
