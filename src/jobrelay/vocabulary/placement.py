"""Reading and writing jobrelay's placement annotations on a management object.

``jobrelay.dev/cluster`` names the worker that holds (or held) its mirror;
``jobrelay.dev/placements`` lists every worker it was placed on, in order,
comma-separated, the current one last, so its length numbers the current run.
An object placed before the history was kept shows its one placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobrelay.vocabulary.meta import Meta, with_annotations
from jobrelay.vocabulary.names import (
    BLOCKED_ANNOTATION,
    CLUSTER_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PLACEMENTS_ANNOTATION,
)


def placement_of(obj: Mapping[str, Any] | None) -> str:
    """The worker the object is placed on (its cluster annotation), or ``""``."""
    return Meta(obj).annotation(CLUSTER_ANNOTATION) or ""


def placements_of(obj: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Every worker the object was placed on, in order; the current one last."""
    text = Meta(obj).annotation(PLACEMENTS_ANNOTATION) or ""
    history = tuple(name for name in text.split(",") if name)
    if history:
        return history
    cluster = placement_of(obj)
    return (cluster,) if cluster else ()


def run_of(obj: Mapping[str, Any] | None) -> int:
    """The current run's number (1 for the first placement; 0 while never placed)."""
    return len(placements_of(obj))


def placement_annotations(cluster: str, history: tuple[str, ...]) -> dict[str, str]:
    """The annotations that record a placement on ``cluster`` after ``history``."""
    return {CLUSTER_ANNOTATION: cluster, PLACEMENTS_ANNOTATION: ",".join(history)}


def with_placement(
    obj: Mapping[str, Any], cluster: str, history: tuple[str, ...]
) -> dict[str, Any]:
    """A shallow copy of ``obj`` placed on ``cluster`` with ``history``."""
    return with_annotations(obj, placement_annotations(cluster, history))


def not_placed_reason(obj: Mapping[str, Any] | None) -> str:
    """Why jobrelay holds the object unplaced (``NotPlaced: ...``), while it is not placed."""
    if placement_of(obj):
        return ""
    return Meta(obj).annotation(NOT_PLACED_ANNOTATION) or ""


def blocked_reason(obj: Mapping[str, Any] | None) -> str:
    """Why the object's mirror cannot create its pods, in its worker's words, or ``""``."""
    return Meta(obj).annotation(BLOCKED_ANNOTATION) or ""
