"""Least-loaded placement: the first real placement policy, filter then score.

Pure: callers pass a snapshot of each worker's state; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """What placement needs to know of one worker cluster."""

    name: str
    connected: bool
    cordoned: bool = False
    # Mirrors jobrelay keeps there that have not finished, plus placements not yet visible.
    active: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    cluster: str | None
    # Why each worker was passed over; shown to users when nothing fits.
    rejected: tuple[tuple[str, str], ...] = ()

    def explain(self) -> str:
        if not self.rejected:
            return "no worker clusters are registered"
        return "; ".join(f"{name}: {why}" for name, why in self.rejected)


def place(candidates: Sequence[Candidate], *, excluded: Iterable[str] = ()) -> Decision:
    """Pick the connected, uncordoned, not excluded worker with the fewest active mirrors.

    Ties go to the name that sorts first, so a decision is reproducible.
    """
    excluded_names = set(excluded)
    rejected: list[tuple[str, str]] = []
    eligible: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: c.name):
        if candidate.name in excluded_names:
            rejected.append(
                (candidate.name, "holds a Job of the same name that jobrelay did not create")
            )
        elif not candidate.connected:
            rejected.append((candidate.name, "not connected"))
        elif candidate.cordoned:
            rejected.append((candidate.name, "cordoned"))
        else:
            eligible.append(candidate)
    if not eligible:
        return Decision(None, tuple(rejected))
    best = min(eligible, key=lambda c: (c.active, c.name))
    return Decision(best.name, tuple(rejected))
