"""Cordon, drain and remove a worker: what the CLI asks and what it concludes, without I/O.

The CLI writes a request on the ``WorkerCluster``'s spec and reads the answer
from its status, which only the controller writes:

========================  ================================================================
field                     meaning
========================  ================================================================
``spec.cordoned``         no new workload is placed on the worker; those there finish
``spec.drain``            ``NotStarted``: the controller re-dispatches the unfinished
                          workloads whose mirror has not started, running ones finish;
                          ``All``: it re-dispatches every unfinished one (counters kept)
``status.activeMirrors``  unfinished mirrors on the worker: 0 means drained
``status.lostTime``       when the controller declared the worker lost
========================  ================================================================

A worker is removed only when no unfinished mirror is left on it (or with
``--force``, which first drains it with ``All``); the CLI then deletes every
mirror still there, so that none is left behind. Every refusal, time-out and
interruption says what it left in place and which command to run next.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import mirror_selector
from jobrelay.vocabulary.workercluster import (
    DrainMode,
    WorkerClusterSpec,
    cordon_patch,
    drain_patch,
    uncordon_patch,
)

__all__ = [
    "CleanupResult",
    "DrainMode",
    "DrainProgress",
    "Removal",
    "RemovalDecision",
    "RemovalPhase",
    "WorkerClusterView",
    "cleanup_message",
    "cordon_message",
    "cordon_patch",
    "decide_removal",
    "drain_interrupted_message",
    "drain_patch",
    "drain_progress",
    "drain_started_message",
    "drain_target",
    "drain_timeout_message",
    "forced_removal_message",
    "leftover_command",
    "removal_interrupted_message",
    "state_summary",
    "uncordon_message",
    "uncordon_patch",
]


@dataclass(frozen=True, slots=True)
class WorkerClusterView:
    """What the CLI reads of one WorkerCluster."""

    name: str
    cordoned: bool = False
    drain: DrainMode | None = None
    # None: the controller never wrote it, so nobody knows what runs there.
    active_mirrors: int | None = None
    connected: str = "Unknown"  # the Connected condition's status: True, False, Unknown
    connected_reason: str = ""
    connected_message: str = ""
    lost_time: str | None = None
    generation: int | None = None
    observed_generation: int | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> WorkerClusterView:
        meta = Meta(obj)
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        conditions = status.get("conditions")
        connected: Mapping[str, Any] = next(
            (
                c
                for c in (conditions if isinstance(conditions, list) else ())
                if isinstance(c, Mapping) and c.get("type") == "Connected"
            ),
            {},
        )
        active = status.get("activeMirrors")
        observed = status.get("observedGeneration")
        generation = meta.raw.get("generation")
        wanted = WorkerClusterSpec.of(obj)
        return cls(
            name=meta.name,
            cordoned=wanted.cordoned,
            drain=wanted.drain,
            active_mirrors=active if isinstance(active, int) else None,
            connected=str(connected.get("status") or "Unknown"),
            connected_reason=str(connected.get("reason") or ""),
            connected_message=str(connected.get("message") or ""),
            lost_time=str(status["lostTime"]) if status.get("lostTime") else None,
            generation=generation if isinstance(generation, int) else None,
            observed_generation=observed if isinstance(observed, int) else None,
        )


def _mirrors(count: int) -> str:
    return f"{count} unfinished mirror{'' if count == 1 else 's'}"


# -- the spec the CLI writes (merge patches) --------------------------------------------


# -- cordon and uncordon ------------------------------------------------------------------


def cordon_message(before: WorkerClusterView) -> str:
    name = before.name
    if before.cordoned:
        draining = f" and draining ({before.drain})" if before.drain else ""
        return f"worker cluster {name} was already cordoned{draining}: nothing changed"
    return (
        f"worker cluster {name} cordoned: no new workloads are placed on it; those already "
        f"there finish there (`jobrelay clusters drain {name}` moves them, "
        f"`jobrelay clusters uncordon {name}` undoes this)"
    )


def uncordon_message(before: WorkerClusterView) -> str:
    name = before.name
    if before.drain:
        return (
            f"worker cluster {name} uncordoned and its drain ({before.drain}) cancelled: it takes "
            "new workloads again; those already moved elsewhere stay where they are"
        )
    if before.cordoned:
        return f"worker cluster {name} uncordoned: it takes new workloads again"
    return f"worker cluster {name} was not cordoned: nothing changed"


# -- drain --------------------------------------------------------------------------------


def drain_target(before: WorkerClusterView, *, force: bool) -> DrainMode:
    """``All`` with --force; an earlier ``All`` is kept (a drain is never weakened by
    re-running it without --force to wait for it)."""
    if force or before.drain is DrainMode.ALL:
        return DrainMode.ALL
    return DrainMode.NOT_STARTED


def drain_started_message(before: WorkerClusterView, mode: DrainMode) -> str:
    name = before.name
    what = (
        "every unfinished workload moves to another worker, counters carried over"
        if mode is DrainMode.ALL
        else "workloads whose mirror has not started move to other workers; running ones "
        "finish here"
    )
    if before.drain is mode:
        return f"worker cluster {name} was already draining ({mode}): {what}"
    if before.drain:
        return f"worker cluster {name} now draining ({mode}, was {before.drain}): {what}"
    return f"worker cluster {name} cordoned and draining ({mode}): {what}"


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """Where a drain stands, as the controller last reported it."""

    done: bool
    line: str


def drain_progress(
    state: WorkerClusterView, *, since_generation: int | None = None
) -> DrainProgress:
    """Done once no unfinished mirror remains and (when the controller reports the
    generation it has acted on) the controller has seen the drain (``since_generation``)."""
    name = state.name
    if (
        since_generation is not None
        and state.observed_generation is not None
        and state.observed_generation < since_generation
    ):
        return DrainProgress(
            False, f"worker cluster {name}: waiting for the controller to see the drain"
        )
    if state.active_mirrors is None:
        return DrainProgress(
            False,
            f"worker cluster {name}: no mirror count yet (status.activeMirrors is unset: "
            "is the controller, `jobrelay run`, running?)",
        )
    if state.active_mirrors > 0:
        line = f"worker cluster {name}: {_mirrors(state.active_mirrors)} left"
        if state.lost_time:
            line += f" (declared lost at {state.lost_time}; the count is from its last contact)"
        elif state.connected != "True":
            reason = state.connected_reason or "Unknown"
            line += f" (not connected: {reason}; the count is from its last contact)"
        return DrainProgress(False, line)
    return DrainProgress(True, f"worker cluster {name} is drained: no unfinished mirrors remain")


def drain_timeout_message(state: WorkerClusterView, mode: DrainMode, timeout: float) -> str:
    name = state.name
    left = (
        _mirrors(state.active_mirrors)
        if state.active_mirrors is not None
        else "an unknown number of unfinished mirrors (no status.activeMirrors: is `jobrelay run` running?)"
    )
    advice = (
        f"`jobrelay clusters drain {name}` to wait again, "
        + (
            ""
            if mode is DrainMode.ALL
            else f"`jobrelay clusters drain {name} --force` to move running workloads too, "
        )
        + f"or `jobrelay clusters uncordon {name}` to cancel it"
    )
    return (
        f"worker cluster {name} still has {left} after {timeout:g}s; the drain ({mode}) stays in "
        f"place and the controller carries on: run {advice}"
    )


def drain_interrupted_message(name: str, mode: DrainMode) -> str:
    return (
        f"interrupted: worker cluster {name} stays cordoned and draining ({mode}) and the "
        f"controller carries on; `jobrelay clusters drain {name}` waits again, "
        f"`jobrelay clusters uncordon {name}` cancels the drain"
    )


# -- remove -------------------------------------------------------------------------------


class Removal(enum.Enum):
    REMOVE = "remove"  # nothing unfinished there: delete its mirrors, then the worker
    DRAIN_ALL_FIRST = "drain-all-first"  # --force: drain with All, wait, then remove
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class RemovalDecision:
    removal: Removal
    message: str


def decide_removal(state: WorkerClusterView, *, force: bool) -> RemovalDecision:
    """May this worker be removed now? Only when no unfinished mirror is left on it
    (drained or never used), or with --force (which drains it with All first)."""
    name = state.name
    if force:
        return RemovalDecision(
            Removal.DRAIN_ALL_FIRST,
            f"--force: draining worker cluster {name} with All before removing it",
        )
    forced = (
        f"or `jobrelay clusters remove {name} --force` to move every unfinished workload "
        "elsewhere now and remove it"
    )
    if state.active_mirrors is None:
        return RemovalDecision(
            Removal.REFUSE,
            f"worker cluster {name} may still run unfinished mirrors: the controller never "
            "reported them (no status.activeMirrors). Start the controller (`jobrelay run`) and "
            f"run `jobrelay clusters drain {name}`, then remove it; {forced}",
        )
    if state.active_mirrors > 0:
        count = _mirrors(state.active_mirrors)
        if state.lost_time:
            return RemovalDecision(
                Removal.REFUSE,
                f"worker cluster {name} was declared lost at {state.lost_time} and still counts "
                f"{count} from its last contact: run `jobrelay clusters remove {name} --force` "
                "to remove it (mirrors it cannot reach are reported)",
            )
        if state.drain:
            return RemovalDecision(
                Removal.REFUSE,
                f"worker cluster {name} is draining ({state.drain}) but still has {count}: "
                f"wait with `jobrelay clusters drain {name}`, then remove it; {forced}",
            )
        return RemovalDecision(
            Removal.REFUSE,
            f"worker cluster {name} has {count}: run `jobrelay clusters drain {name}` (running "
            f"workloads finish, the others move), then remove it; {forced}",
        )
    why = "drained" if state.drain else "no unfinished mirrors"
    return RemovalDecision(Removal.REMOVE, f"worker cluster {name}: {why}, removing it")


def forced_removal_message(state: WorkerClusterView, timeout: float) -> str:
    left = (
        _mirrors(state.active_mirrors)
        if state.active_mirrors is not None
        else "an unknown number of unfinished mirrors"
    )
    return (
        f"worker cluster {state.name} still has {left} after {timeout:g}s of draining; "
        "removing it anyway (--force): its mirrors are deleted and the controller "
        "re-dispatches the workloads of a removed worker"
    )


class RemovalPhase(enum.Enum):
    """How far a removal got: what an interruption leaves behind."""

    CHECKING = "checking"  # nothing written yet
    DRAINING = "draining"  # --force: cordoned and draining with All
    CLEANING = "cleaning"  # cordoned; deleting the mirrors left on the worker
    UNREGISTERING = "unregistering"  # deleting the WorkerCluster and its Secret


def removal_interrupted_message(name: str, phase: RemovalPhase, *, force: bool) -> str:
    again = f"`jobrelay clusters remove {name}{' --force' if force else ''}`"
    if phase is RemovalPhase.CHECKING:
        return f"interrupted: nothing changed on worker cluster {name}"
    if phase is RemovalPhase.DRAINING:
        return (
            f"interrupted: nothing removed; worker cluster {name} stays cordoned and draining "
            f"(All) and the controller carries on; {again} resumes, "
            f"`jobrelay clusters uncordon {name}` cancels the drain"
        )
    if phase is RemovalPhase.CLEANING:
        return (
            f"interrupted while deleting the mirrors left on worker cluster {name}: it stays "
            f"registered and cordoned; {again} finishes the job"
        )
    return (
        f"interrupted while deleting worker cluster {name}'s WorkerCluster and Secret: "
        f"{again} finishes the job (`jobrelay clusters list` shows whether it is still there)"
    )


# -- leaving no mirror behind -------------------------------------------------------------


def leftover_command(kind_names: Sequence[str], controller_name: str, origin: str) -> str:
    """What deletes the mirrors left on a worker, with its kubeconfig in hand.

    kubectl takes ``Kind.version.group`` as a type, so no plural is needed.
    """
    return (
        f"kubectl --kubeconfig WORKER-KUBECONFIG delete {','.join(kind_names)} "
        f"--all-namespaces -l {mirror_selector(controller_name, origin)}"
    )


@dataclass(frozen=True, slots=True)
class CleanupResult:
    """What deleting the mirrors left on a worker did."""

    deleted: Mapping[str, int] = field(default_factory=dict)  # per Kind.version.group
    not_served: tuple[str, ...] = ()  # kinds the worker does not serve: no mirror can exist
    error: str | None = None  # why the worker could not be reached: mirrors may remain


def cleanup_message(
    name: str,
    result: CleanupResult,
    *,
    kind_names: Sequence[str],
    controller_name: str,
    origin: str,
    force: bool,
) -> str:
    """What was deleted; when the worker was out of reach, what remains and how to clean it.

    Without --force an unreachable worker is not removed: its Secret is the only
    credential jobrelay has to clean up later.
    """
    deleted = ", ".join(f"{count} {kind}" for kind, count in result.deleted.items() if count)
    not_served = (
        f" (not served there, so none: {', '.join(result.not_served)})" if result.not_served else ""
    )
    if result.error is None:
        done = f"deleted {deleted} mirror(s)" if deleted else "no mirrors left to delete"
        return f"worker cluster {name}: {done}{not_served}"
    command = leftover_command(kind_names, controller_name, origin)
    failed = (
        f"worker cluster {name}: {f'deleted {deleted} mirror(s), then ' if deleted else ''}"
        f"cannot delete its mirrors ({result.error}), so some may remain"
    )
    if force:
        return (
            f"{failed}. Removing it anyway (--force); once it answers, delete them with:\n"
            f"  {command}"
        )
    return (
        f"{failed}: nothing was removed and it stays cordoned. Fix the connection or "
        f"credentials (`jobrelay clusters list` shows why) and run `jobrelay clusters remove "
        f"{name}` again, or `jobrelay clusters remove {name} --force` to remove it anyway and "
        f"delete what remains later with:\n  {command}"
    )


# -- jobrelay clusters list ---------------------------------------------------------------


def state_summary(state: WorkerClusterView) -> str:
    """The STATE column: Lost, Draining(mode) or Cordoned, comma-joined; else Schedulable."""
    parts = []
    if state.lost_time:
        parts.append("Lost")
    if state.drain:
        parts.append(f"Draining({state.drain})")
    elif state.cordoned:
        parts.append("Cordoned")
    return ",".join(parts) or "Schedulable"
