"""Carry-over: what earlier runs of a Job did, and what is left for the next run.

A Job moves to another worker (its worker was lost or drained) or starts
again on the same one (its mirror was deleted behind jobrelay's back). The
management Job's status already shows what every earlier run did; the next
mirror is created with that record on it (an annotation), so that

- its status is added to the record: ``succeeded`` and ``failed`` add up,
  completed and failed indexes are unions, and the management status never
  goes backwards (contract rules 6 and 13);
- it runs only what remains, as far as the Job API can say it: fewer
  ``completions`` (NonIndexed), fewer retries (``backoffLimit``), less time
  (``activeDeadlineSeconds``). An Indexed Job's mirror cannot be told to skip
  indexes: it runs them all again (docs/failure-modes.md).

The record is written on the mirror at its creation, so it is atomic with the
run it describes, and the management Job needs no extra write to move.
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass
from typing import Any

from jobrelay.kinds.job.spec import is_indexed
from jobrelay.kinds.mirrors import carried_over
from jobrelay.vocabulary.json_types import JsonObj


@dataclass(frozen=True, slots=True)
class Carry:
    """What earlier runs did, as the management status showed it when the mirror was made."""

    succeeded: int = 0
    failed: int = 0
    completedIndexes: str = ""
    failedIndexes: str = ""
    # Seconds between the Job's first start and this run's creation.
    elapsedSeconds: int = 0

    def to_json(self) -> JsonObj:
        """The annotation's content: only what is not zero."""
        return {k: v for k, v in asdict(self).items() if v}

    @classmethod
    def from_json(cls, value: JsonObj) -> Carry:
        """Read back leniently: a field that is missing or of the wrong type counts as zero."""
        fields: dict[str, Any] = {}
        for name, default in asdict(cls()).items():
            item = value.get(name, default)
            fields[name] = item if isinstance(item, type(default)) else default
        return cls(**fields)

    def __bool__(self) -> bool:
        return bool(self.to_json())


def carry_of(job: JsonObj, *, now: str) -> Carry:
    """What the management Job's status says all runs so far did."""
    status: JsonObj = job.get("status") or {}
    return Carry(
        succeeded=int(status.get("succeeded") or 0),
        failed=int(status.get("failed") or 0),
        completedIndexes=str(status.get("completedIndexes") or ""),
        failedIndexes=str(status.get("failedIndexes") or ""),
        elapsedSeconds=elapsed_seconds(status.get("startTime"), now),
    )


def mirror_carry(mirror: JsonObj) -> Carry:
    """The record a mirror was created with (empty for a first run)."""
    return Carry.from_json(carried_over(mirror))


def remaining_spec(spec: JsonObj, carry: Carry) -> JsonObj:
    """The Job spec a run after ``carry`` needs: only what remains to do."""
    if not carry:
        return spec
    remaining = dict(spec)
    completions = spec.get("completions")
    if completions is not None and not is_indexed(spec):
        left = max(1, int(completions) - carry.succeeded)
        remaining["completions"] = left
        remaining["parallelism"] = min(int(spec.get("parallelism", 1)), left)
    if spec.get("backoffLimit") is not None:
        remaining["backoffLimit"] = max(0, int(spec["backoffLimit"]) - carry.failed)
    if spec.get("activeDeadlineSeconds") is not None:
        remaining["activeDeadlineSeconds"] = max(
            1, int(spec["activeDeadlineSeconds"]) - carry.elapsedSeconds
        )
    return remaining


def elapsed_seconds(start_time: object, now: str) -> int:
    """Whole seconds from ``start_time`` to ``now`` (both RFC 3339); 0 when unknown."""
    if not isinstance(start_time, str) or not start_time:
        return 0
    try:
        start = datetime.datetime.fromisoformat(start_time)
        end = datetime.datetime.fromisoformat(now)
    except ValueError:
        return 0
    return max(0, int((end - start).total_seconds()))
