"""Least-loaded placement: the first real placement policy, filter then score.

Pure: callers pass a snapshot of each worker's state; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """What placement needs to know of one worker cluster."""

    name: str
    connected: bool
    cordoned: bool = False
    draining: bool = False
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


_FOREIGN_NAMESAKE = "holds a Job of the same name that jobrelay did not create"


def place(
    candidates: Sequence[Candidate], *, excluded: Iterable[str] | Mapping[str, str] = ()
) -> Decision:
    """Pick the connected, uncordoned, not excluded worker with the fewest active mirrors.

    ``excluded`` names workers not to use, each with why (a plain list of names:
    they hold a namesake jobrelay did not create). Ties go to the name that
    sorts first, so a decision is reproducible.
    """
    why_excluded = (
        dict(excluded)
        if isinstance(excluded, Mapping)
        else dict.fromkeys(excluded, _FOREIGN_NAMESAKE)
    )
    rejected: list[tuple[str, str]] = []
    eligible: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: c.name):
        if candidate.name in why_excluded:
            rejected.append((candidate.name, why_excluded[candidate.name]))
        elif not candidate.connected:
            rejected.append((candidate.name, "not connected"))
        elif candidate.draining:
            rejected.append((candidate.name, "draining"))
        elif candidate.cordoned:
            rejected.append((candidate.name, "cordoned"))
        else:
            eligible.append(candidate)
    if not eligible:
        return Decision(None, tuple(rejected))
    best = min(eligible, key=lambda c: (c.active, c.name))
    return Decision(best.name, tuple(rejected))
