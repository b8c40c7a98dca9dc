"""Why a workload is held, as the fair-share rules say it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Holding"]


@dataclass(frozen=True, slots=True)
class Holding:
    """Why a workload is held: the reason of its condition or Event and a message for
    its user."""

    reason: str
    message: str
