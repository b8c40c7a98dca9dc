"""Placement scores, one per ``jobrelay.dev/placement`` value."""

from __future__ import annotations

from collections.abc import Mapping

from jobrelay.placement.model import Score
from jobrelay.placement.scores.allocation import LeastAllocated, MostAllocated
from jobrelay.placement.scores.ordered import Ordered
from jobrelay.placement.workload import Strategy

SCORES: Mapping[Strategy, Score] = {
    score.name: score for score in (LeastAllocated(), MostAllocated(), Ordered())
}

__all__ = ["SCORES", "LeastAllocated", "MostAllocated", "Ordered"]
