"""Reading and writing jobrelay's placement annotations on a management object.

``jobrelay.dev/cluster`` names the worker that holds (or held) its mirror;
``jobrelay.dev/placements`` lists every worker it was placed on, in order,
comma-separated, the current one last, so its length numbers the current run.
An object placed before the history was kept shows its one placement.

``jobrelay.dev/mirrors`` records the mirror each run created: ``<run>:<worker>:<uid>``,
comma-separated. Only a recorded mirror is followed (decide.py); objects placed
before the record was kept have none, and their one current mirror is adopted.

``jobrelay.dev/worker-failures`` records each move away from a worker after a
worker-side failure there: ``<worker>@<RFC 3339 time>``, comma-separated, oldest first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from jobrelay.vocabulary.meta import annotation_of, with_annotations
from jobrelay.vocabulary.names import (
    BLOCKED_ANNOTATION,
    CLUSTER_ANNOTATION,
    MIRRORS_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PLACEMENTS_ANNOTATION,
    WORKER_FAILURES_ANNOTATION,
)


def placement_of(obj: Mapping[str, Any] | None) -> str:
    """The worker the object is placed on (its cluster annotation), or ``""``."""
    return annotation_of(obj, CLUSTER_ANNOTATION) or ""


def placements_of(obj: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Every worker the object was placed on, in order; the current one last."""
    text = annotation_of(obj, PLACEMENTS_ANNOTATION) or ""
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
    return annotation_of(obj, NOT_PLACED_ANNOTATION) or ""


def blocked_reason(obj: Mapping[str, Any] | None) -> str:
    """Why the object's mirror cannot create its pods, in its worker's words, or ``""``."""
    return annotation_of(obj, BLOCKED_ANNOTATION) or ""


class RecordedMirror(NamedTuple):
    """The mirror jobrelay created for one run: on which worker, with which UID."""

    cluster: str
    uid: str


# Runs past this are not records jobrelay wrote (a placement history is never that long).
_MAX_RECORDED_RUN = 100_000


def mirror_records(obj: Mapping[str, Any] | None) -> Mapping[int, RecordedMirror]:
    """The mirrors recorded on the object, by run; malformed entries are left out (the
    annotation may have been edited: an entry that cannot be read records nothing)."""
    text = annotation_of(obj, MIRRORS_ANNOTATION) or ""
    # One decision asks about each worker's mirror several times: a text of the length
    # jobrelay writes is read once; a longer one (not jobrelay's) is not kept.
    return _cached_records(text) if len(text) <= _CACHED_LENGTH else _read_records(text)


_CACHED_LENGTH = 1024


def _read_records(text: str) -> Mapping[int, RecordedMirror]:
    records: dict[int, RecordedMirror] = {}
    for entry in text.split(","):
        run, _, rest = entry.strip().partition(":")
        cluster, _, uid = rest.partition(":")
        if (
            not (run.isascii() and run.isdigit() and len(run) <= 6 and cluster and uid)
            or ":" in uid
        ):
            continue
        number = int(run)
        if 1 <= number <= _MAX_RECORDED_RUN:
            records[number] = RecordedMirror(cluster, uid)
    return MappingProxyType(records)


_cached_records = functools.lru_cache(maxsize=4096)(_read_records)


def with_recorded_mirror(
    obj: Mapping[str, Any] | None, run: int, cluster: str, uid: str
) -> dict[str, str]:
    """The annotation that records ``uid`` on ``cluster`` as run ``run``'s mirror, over
    the object's earlier records (those of later runs are dropped: no such run exists)."""
    records = {r: m for r, m in mirror_records(obj).items() if r < run}
    records[run] = RecordedMirror(cluster, uid)
    return {MIRRORS_ANNOTATION: _records_text(records)}


def without_records_from(obj: Mapping[str, Any] | None, run: int) -> dict[str, str | None]:
    """The annotation that forgets the records of run ``run`` and later (None: no record left)."""
    records = {r: m for r, m in mirror_records(obj).items() if r < run}
    return {MIRRORS_ANNOTATION: _records_text(records) or None}


def _records_text(records: Mapping[int, RecordedMirror]) -> str:
    return ",".join(f"{r}:{m.cluster}:{m.uid}" for r, m in sorted(records.items()))


# Moves recorded past this many were not written by jobrelay (nor would a budget use them).
MAX_RECORDED_FAILURES = 100
_WORKER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# The one time format jobrelay writes (vocabulary/timestamps.py), checked by shape here.
_TIME_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


class FailedOn(NamedTuple):
    """One move after a worker-side failure: the worker left, and when (RFC 3339)."""

    cluster: str
    at: str


def worker_failures_of(obj: Mapping[str, Any] | None) -> tuple[FailedOn, ...]:
    """The moves after worker-side failures recorded on ``obj``, oldest first; entries not
    of jobrelay's shape are left out, and at most :data:`MAX_RECORDED_FAILURES` are read."""
    text = annotation_of(obj, WORKER_FAILURES_ANNOTATION)
    if not text:
        return ()
    found = []
    for entry in text.split(",", MAX_RECORDED_FAILURES)[:MAX_RECORDED_FAILURES]:
        cluster, _, at = entry.strip().partition("@")
        if _WORKER_NAME.match(cluster) and _TIME_SHAPE.match(at):
            found.append(FailedOn(cluster, at))
    return tuple(found)


def with_worker_failure(obj: Mapping[str, Any] | None, cluster: str, at: str) -> str:
    """``obj``'s record once the move away from ``cluster`` at ``at`` is added (the
    oldest entries go past :data:`MAX_RECORDED_FAILURES`)."""
    entries = (*worker_failures_of(obj), FailedOn(cluster, at))[-MAX_RECORDED_FAILURES:]
    return ",".join(f"{entry.cluster}@{entry.at}" for entry in entries)
