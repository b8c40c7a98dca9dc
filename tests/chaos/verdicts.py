"""How the chaos test judges what its watches recorded: pure functions, no I/O.

Deliberately independent of the code under test (as ``tests.kubetools.WatchRecorder``
is): it reads the recorded objects with its own few lines, sharing only the names
of jobrelay's annotations and labels. Each function's docstring says what it
checks and how exact it is; the chaos test's module docstring gathers them.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    ORIGIN_UID_LABEL,
    PLACEMENTS_ANNOTATION,
    RUN_ANNOTATION,
)

Obj = dict[str, Any]

STICKY_CONDITIONS = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")
FINAL_CONDITIONS = ("Complete", "Failed")
# The label the worker's apiserver puts on a Job's pods: the uid of the Job (the mirror).
POD_JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"


# -- reading objects ---------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One event a watch delivered: its type, the object, when it arrived (monotonic s)."""

    type: str
    obj: Obj
    at: float


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def status(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("status") or {})


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        entry.get("type") == kind and entry.get("status") == "True"
        for entry in status(obj).get("conditions") or []
    )


def final_condition(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(type, reason) of the True ``Complete`` or ``Failed`` condition, if any."""
    for entry in status(obj).get("conditions") or []:
        if entry.get("type") in FINAL_CONDITIONS and entry.get("status") == "True":
            return str(entry["type"]), str(entry.get("reason") or "")
    return None


def is_finished(obj: Mapping[str, Any]) -> bool:
    return final_condition(obj) is not None


def placements(obj: Mapping[str, Any]) -> list[str]:
    text = annotations_of(obj).get(PLACEMENTS_ANNOTATION) or ""
    return [name for name in text.split(",") if name]


def parse_indexes(text: str | None) -> set[int]:
    """``"0-2,5"`` -> ``{0, 1, 2, 5}`` (the Job API's interval notation)."""
    found: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def format_indexes(indexes: Iterable[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    runs: list[list[int]] = []
    for index in sorted(set(indexes)):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass(frozen=True)
class Counts:
    """What a Job's status counts: successes, failures, completed indexes."""

    succeeded: int = 0
    failed: int = 0
    completed: frozenset[int] = frozenset()

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.succeeded + other.succeeded,
            self.failed + other.failed,
            self.completed | other.completed,
        )

    def as_indexed(self) -> Counts:
        """For an Indexed Job, whose ``succeeded`` is the number of completed indexes."""
        return Counts(len(self.completed), self.failed, self.completed)

    def covers(self, other: Counts) -> bool:
        """Every figure at least ``other``'s."""
        return (
            self.succeeded >= other.succeeded
            and self.failed >= other.failed
            and self.completed >= other.completed
        )

    def show(self) -> str:
        text = f"succeeded={self.succeeded} failed={self.failed}"
        return text + (f" completed={format_indexes(self.completed)}" if self.completed else "")


def counted(job_status: Mapping[str, Any], *, indexed: bool) -> Counts:
    """What a Job's status counts, its terminated-but-uncounted pods included (they are
    counted: the Job controller only has to move them to the counters)."""
    uncounted = job_status.get("uncountedTerminatedPods") or {}
    completed = frozenset(parse_indexes(job_status.get("completedIndexes")))
    return Counts(
        succeeded=len(completed)
        if indexed
        else int(job_status.get("succeeded") or 0) + len(uncounted.get("succeeded") or []),
        failed=int(job_status.get("failed") or 0) + len(uncounted.get("failed") or []),
        completed=completed,
    )


def carried(mirror: Mapping[str, Any]) -> Counts:
    """What the mirror says earlier runs did (its carried-over annotation; none: a first run)."""
    text = annotations_of(mirror).get(CARRIED_OVER_ANNOTATION)
    record = json.loads(text) if text else {}
    return Counts(
        succeeded=int(record.get("succeeded") or 0),
        failed=int(record.get("failed") or 0),
        completed=frozenset(parse_indexes(record.get("completedIndexes"))),
    )


# -- the Job as submitted --------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """A submitted Job's shape and the outcome its pods' fate annotations make certain."""

    name: str
    shape: str  # "single", "parallel" (NonIndexed), "indexed"
    completions: int
    parallelism: int
    backoff_limit: int
    duration_s: int
    fails: bool

    @property
    def indexed(self) -> bool:
        return self.shape == "indexed"

    @property
    def outcome(self) -> str:
        return "Failed" if self.fails else "Complete"


# -- runs: one mirror each -------------------------------------------------------------


@dataclass
class Run:
    """One mirror of a Job: where, which run, every version a watch saw of it, its pods."""

    worker: str
    uid: str
    number: int
    versions: list[Seen]
    pods: dict[str, list[Seen]] = field(default_factory=dict)  # pod uid -> versions

    @property
    def first(self) -> Obj:
        return self.versions[0].obj

    @property
    def last(self) -> Obj:
        return self.versions[-1].obj

    @property
    def carry(self) -> Counts:
        return carried(self.first)

    @property
    def deleted(self) -> bool:
        return any(seen.type == "DELETED" for seen in self.versions)

    def final_counts(self, *, indexed: bool) -> Counts:
        return counted(status(self.last), indexed=indexed)

    def succeeded_pods(self) -> int:
        return sum(
            any(status(seen.obj).get("phase") == "Succeeded" for seen in versions)
            for versions in self.pods.values()
        )

    def pod_intervals(self) -> list[tuple[float, float]]:
        """When each of its pods ran, by the watch's clock: from the pod's first version
        to the first that shows it ended or going (or forever, if none does)."""
        intervals = []
        for versions in self.pods.values():
            end = next(
                (
                    seen.at
                    for seen in versions
                    if seen.type == "DELETED"
                    or meta(seen.obj).get("deletionTimestamp")
                    or status(seen.obj).get("phase") in ("Succeeded", "Failed")
                ),
                float("inf"),
            )
            intervals.append((versions[0].at, end))
        return intervals


def runs_of(
    job_uid: str, mirrors: Mapping[str, Sequence[Seen]], pods: Mapping[str, Sequence[Seen]]
) -> list[Run]:
    """Every mirror of the Job ``job_uid`` (by its origin label) on every worker, in the
    order they ran: by run number, then by when the watch first saw them (a mirror of the
    same run made again after one vanished is always on the same worker)."""
    found: dict[str, Run] = {}
    for worker, events in mirrors.items():
        for seen in events:
            labels = meta(seen.obj).get("labels") or {}
            if labels.get(ORIGIN_UID_LABEL) != job_uid:
                continue
            uid = uid_of(seen.obj)
            if uid not in found:
                number = int(annotations_of(seen.obj).get(RUN_ANNOTATION) or 1)
                found[uid] = Run(worker, uid, number, [])
            found[uid].versions.append(seen)
    for run in found.values():
        for seen in pods.get(run.worker, ()):
            if (meta(seen.obj).get("labels") or {}).get(POD_JOB_UID_LABEL) == run.uid:
                run.pods.setdefault(uid_of(seen.obj), []).append(seen)
    return sorted(found.values(), key=lambda run: (run.number, run.versions[0].at))


# -- the checks ----------------------------------------------------------------------


def regressions(versions: Sequence[Obj]) -> list[str]:
    """What went backwards over every recorded version of one management Job.

    ``succeeded`` and ``failed`` never decrease, ``completedIndexes`` never loses an
    index, a True ``Complete``/``Failed``/``FailureTarget``/``SuccessCriteriaMet``
    stays True, ``startTime`` never changes once set (these Jobs are never
    suspended), and the placement history only grows at its end.
    """
    problems: list[str] = []
    best = {"succeeded": 0, "failed": 0}
    done: set[int] = set()
    sticky: set[str] = set()
    start_time: str | None = None
    history: list[str] = []
    for version in versions:
        current = status(version)
        rv = meta(version).get("resourceVersion")
        for counter in best:
            value = int(current.get(counter) or 0)
            if value < best[counter]:
                problems.append(f"rv {rv}: {counter} went from {best[counter]} to {value}")
            best[counter] = max(best[counter], value)
        indexes = parse_indexes(current.get("completedIndexes"))
        if not indexes >= done:
            problems.append(f"rv {rv}: completedIndexes lost {format_indexes(done - indexes)}")
        done |= indexes
        for kind in STICKY_CONDITIONS:
            if condition_true(version, kind):
                sticky.add(kind)
            elif kind in sticky:
                problems.append(f"rv {rv}: {kind}=True went away")
        started = current.get("startTime")
        if start_time is not None and started != start_time:
            problems.append(f"rv {rv}: startTime changed from {start_time} to {started}")
        start_time = start_time or started
        now = placements(version)
        if now[: len(history)] != history:
            problems.append(f"rv {rv}: placements went from {history} to {now}")
        history = max(history, now, key=len)
    return problems


def total(run: Run, *, indexed: bool) -> Counts:
    """What a run carried over plus what its last version counts."""
    both = run.carry + run.final_counts(indexed=indexed)
    return both.as_indexed() if indexed else both


def disagreements(job: Obj, expected: Expected, runs: Sequence[Run], *, lost: str) -> list[str]:
    """Where the final management status disagrees with what its runs did.

    Exact: the placement history lists each run's worker at its number; the
    management counters equal what the last run carried over plus what its last
    version counts (``failed``, ``succeeded``; for an Indexed Job the union of
    completed indexes), and when that mirror finished, the management Job ended the
    same way (type and reason). Bounded, where the last run is on the lost worker
    and never finished (the watch saw versions after the thaw that jobrelay rightly
    never copied): carried over <= management <= carried over plus its last version.
    Between consecutive runs: what is carried over never shrinks, and is never more
    than the earlier run carried plus what it counted (nothing invented).
    """
    if not runs:
        return ["no mirror of it was ever seen"]
    problems: list[str] = []
    history = placements(job)
    for run in runs:
        if run.number > len(history) or history[run.number - 1] != run.worker:
            problems.append(f"run {run.number} on {run.worker}, placements {history}")
    last = runs[-1]
    if len(history) != last.number:
        problems.append(f"{len(history)} placements {history}, last run is {last.number}")
    management = counted(status(job), indexed=expected.indexed)
    if expected.indexed and int(status(job).get("succeeded") or 0) != len(management.completed):
        problems.append(f"succeeded {status(job).get('succeeded')} != completed indexes")
    ran = total(last, indexed=expected.indexed)
    if last.worker == lost and not is_finished(last.last):
        if not (ran.covers(management) and management.covers(last.carry)):
            problems.append(
                f"management {management.show()} not between what run {last.number} carried "
                f"({last.carry.show()}) and that plus its last version ({ran.show()})"
            )
    elif management != ran:
        problems.append(
            f"management {management.show()} != run {last.number} on {last.worker}: carried "
            f"{last.carry.show()} + last version {last.final_counts(indexed=expected.indexed).show()}"
        )
    if is_finished(last.last) and final_condition(last.last) != final_condition(job):
        problems.append(
            f"ended {final_condition(job)}, its last mirror ended {final_condition(last.last)}"
        )
    for earlier, later in itertools.pairwise(runs):
        before = total(earlier, indexed=expected.indexed)
        if not later.carry.covers(earlier.carry) or not before.covers(later.carry):
            problems.append(
                f"run {later.number} ({later.worker}) carried {later.carry.show()} after run "
                f"{earlier.number} ({earlier.worker}) carried {earlier.carry.show()} and "
                f"counted {earlier.final_counts(indexed=expected.indexed).show()}"
            )
    return problems


def outcome_problems(job: Obj, expected: Expected) -> list[str]:
    """The end its pods' fate makes certain, and a sound finished status.

    Complete: reason ``CompletionsReached``, ``succeeded == completions`` (Indexed:
    every index completed), no failure. Failed: reason ``BackoffLimitExceeded``,
    ``failed > backoffLimit`` (exactly ``backoffLimit + 1`` with one pod at a time),
    no success. Either way ``startTime`` set, no pod active or uncounted, and a
    Complete Job's ``completionTime`` not before its ``startTime``.
    """
    problems: list[str] = []
    current = status(job)
    ended = final_condition(job)
    succeeded, failed = int(current.get("succeeded") or 0), int(current.get("failed") or 0)
    if expected.fails:
        if ended != ("Failed", "BackoffLimitExceeded"):
            problems.append(f"ended {ended}, expected Failed (BackoffLimitExceeded)")
        if failed <= expected.backoff_limit or succeeded:
            problems.append(
                f"failed={failed} succeeded={succeeded}, backoffLimit {expected.backoff_limit}"
            )
        if expected.parallelism == 1 and failed != expected.backoff_limit + 1:
            problems.append(
                f"failed={failed} one pod at a time, backoffLimit {expected.backoff_limit}"
            )
    else:
        if ended != ("Complete", "CompletionsReached"):
            problems.append(f"ended {ended}, expected Complete (CompletionsReached)")
        if succeeded != expected.completions or failed:
            problems.append(
                f"succeeded={succeeded} failed={failed}, completions {expected.completions}"
            )
        if expected.indexed:
            wanted = format_indexes(range(expected.completions))
            if current.get("completedIndexes") != wanted:
                problems.append(
                    f"completedIndexes {current.get('completedIndexes')!r} != {wanted!r}"
                )
    if not current.get("startTime"):
        problems.append("no startTime")
    if (
        ended
        and ended[0] == "Complete"
        and not (
            current.get("completionTime")
            and current["completionTime"] >= current.get("startTime", "")
        )
    ):
        problems.append(f"completionTime {current.get('completionTime')} vs startTime")
    if current.get("active") or current.get("ready") or current.get("terminating"):
        problems.append("finished with pods shown running")
    if any((current.get("uncountedTerminatedPods") or {}).values()):
        problems.append("finished with uncounted pods")
    return problems


@dataclass(frozen=True)
class Rework:
    """NonIndexed successes beyond ``completions``, and those jobrelay could not count."""

    extra: int  # pods that ran for work already done
    uncountable: int  # successes lost with a mirror deleted by hand before jobrelay counted them


@dataclass(frozen=True)
class Deletion:
    """A mirror deleted by hand: when (the watches' monotonic clock), the replicas ready
    just before (their caches synced, so their watches saw it go) and those SIGKILLed
    before it (the Lease may still name one, but it never acts again)."""

    at: float
    watchers: frozenset[str]
    killed: frozenset[str] = frozenset()


def holders_between(lease: Sequence[Seen], start: float, end: float) -> set[str]:
    """Every replica the Lease named as holder at some moment from ``start`` to ``end``."""
    holders: set[str] = set()
    current = ""
    for seen in lease:
        holder = str((seen.obj.get("spec") or {}).get("holderIdentity") or "")
        if seen.at <= start:
            current = holder
        elif seen.at <= end and holder:
            holders.add(holder)
    return holders | ({current} if current else set())


def shown_when_unwatched(
    run: Run, later: Run | None, deletion: Deletion, lease: Sequence[Seen], job: Sequence[Seen]
) -> int | None:
    """What jobrelay could know of a run whose mirror was deleted by hand.

    None when every live replica that held the Lease from the deletion until one acted
    on it had watched the mirror go: its last status must count. A leader acts on it
    with the first management status after it that shows nothing running, or with the
    next run (its first sight). Otherwise a leader learnt of the deletion only from the
    mirror's absence, and the management status as last copied is what carries over
    (docs/failure-modes.md): the successes of this run the management Job (``job``:
    its versions) showed at the deletion.
    """
    acted = (
        seen.at for seen in job if seen.at > deletion.at and not status(seen.obj).get("active")
    )
    end = min(next(acted, math.inf), later.versions[0].at if later is not None else math.inf)
    if holders_between(lease, deletion.at, end) - deletion.killed <= deletion.watchers:
        return None
    shown = [seen for seen in job if seen.at <= deletion.at]
    succeeded = int(status(shown[-1].obj).get("succeeded") or 0) if shown else 0
    return max(0, succeeded - run.carry.succeeded)


def rework(
    expected: Expected, runs: Sequence[Run], *, lost: str, deleted: Mapping[str, int | None]
) -> Rework:
    """Succeeded pods of a NonIndexed Job beyond its completions, over every run but those
    on the lost worker that the Job moved away from (their pods ran on, unseen, by design).

    Exact but for the allowance of a mirror deleted by hand (``deleted``: mirror uid ->
    :func:`shown_when_unwatched`). It takes with it successes its own Job controller
    had not counted yet: no status ever shows them, so nothing can carry them over
    and they are done again. When no leader that acted on it had watched it go, the
    successes its status counted but the management Job did not show yet go too.
    Those are counted apart (``uncountable``), pod by pod against what jobrelay could
    know: the mirror's last status, or the management Job's at the deletion.
    """
    if expected.indexed:
        return Rework(0, 0)
    final = runs[-1] if runs else None
    pods = uncountable = 0
    for run in runs:
        if run.worker == lost and run is not final:
            continue
        succeeded = run.succeeded_pods()
        pods += succeeded
        if run.uid in deleted:
            shown = deleted[run.uid]
            known = run.final_counts(indexed=False).succeeded if shown is None else shown
            uncountable += max(0, succeeded - known)
    return Rework(max(0, pods - uncountable - expected.completions), uncountable)


def ran_at_once(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """Pairs of workers on which pods of this Job ran at the same time (by the watches'
    clock, which can only make an overlap look longer: a worker's end is seen late)."""
    pairs: set[tuple[str, str]] = set()
    for a in runs:
        for b in runs:
            if a.worker >= b.worker:
                continue
            if any(
                start_a < end_b and start_b < end_a
                for start_a, end_a in a.pod_intervals()
                for start_b, end_b in b.pod_intervals()
            ):
                pairs.add((a.worker, b.worker))
    return sorted(pairs)


@dataclass(frozen=True)
class Handover:
    """The Lease changing hands: who held it, who took it, and the Lease's own times."""

    old: str
    new: str
    last_renewal: str  # the old holder's last renewTime the watch saw
    acquired: str  # the new holder's acquireTime
    seen_at: float  # when the watch saw the new holder (monotonic)

    @property
    def gap(self) -> float:
        """Seconds from the old holder's last renewal to the new holder's acquisition."""
        return micro_time(self.acquired) - micro_time(self.last_renewal)


def micro_time(stamp: str) -> float:
    """A Lease MicroTime (RFC 3339 with microseconds) as seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def handovers(lease: Sequence[Seen]) -> list[Handover]:
    """Every change of the Lease's holder its watch saw (a release, no holder, is not one)."""
    found: list[Handover] = []
    holder, renewed = "", ""
    for seen in lease:
        spec = seen.obj.get("spec") or {}
        now = str(spec.get("holderIdentity") or "")
        if now and holder and now != holder:
            found.append(Handover(holder, now, renewed, str(spec.get("acquireTime")), seen.at))
        if now:
            holder, renewed = now, str(spec.get("renewTime") or spec.get("acquireTime") or "")
    return found
