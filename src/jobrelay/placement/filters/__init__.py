"""Placement filters, cheapest first; fit, the costly one, last."""

from __future__ import annotations

from jobrelay.placement.filters.choice import JobClusters, JobSelector
from jobrelay.placement.filters.data import DataLocality
from jobrelay.placement.filters.dependencies import ForeignDependencies
from jobrelay.placement.filters.fit import Fits
from jobrelay.placement.filters.policy import NamespacePolicy
from jobrelay.placement.filters.state import Connected, NotCordoned, NotExcluded
from jobrelay.placement.filters.worker_namespace import WorkerNamespace
from jobrelay.placement.model import Filter

FILTERS: tuple[Filter, ...] = (
    NamespacePolicy(),
    JobClusters(),
    JobSelector(),
    NotExcluded(),
    Connected(),
    NotCordoned(),
    WorkerNamespace(),
    ForeignDependencies(),
    DataLocality(),
    Fits(),
)

__all__ = [
    "FILTERS",
    "Connected",
    "DataLocality",
    "Fits",
    "ForeignDependencies",
    "JobClusters",
    "JobSelector",
    "NamespacePolicy",
    "NotCordoned",
    "NotExcluded",
    "WorkerNamespace",
]
