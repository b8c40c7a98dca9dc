"""The management object's status as its mirror says it: the write, checked against
the kind's rules, and the status of a run that ended without finishing. Pure.

Used by the steps that end a run (placing a suspended workload, a move, a
mirror that vanished) and by the status step.
"""

from __future__ import annotations

from jobrelay.controller.relay.mirror_standing import is_current
from jobrelay.controller.relay.plan import Action, Done, Plan, Terminal, WriteStatus
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.facts import version
from jobrelay.controller.relay.steps.plan_parts import finish_event
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.merge_patch import merge_patch

# What reading a malformed status raises (a list where a count belongs, say).
UNREADABLE = (TypeError, ValueError, AttributeError, KeyError, IndexError)


def status_write(
    s: Snapshot, obj: JsonObj, mirror: JsonObj | None, *, gone: bool = False
) -> WriteStatus | Terminal | None:
    """A status write when the status should change; Terminal if the kind's rules refuse it,
    or if the mirror's status cannot be read (a worker may answer anything)."""
    try:
        status = s.kind.next_status(obj, mirror, now=s.now, gone=gone)
    except UNREADABLE as error:
        return Terminal(
            "StatusNotCopied",
            f"the status of its mirror cannot be read ({type(error).__name__}: {error}); "
            f"the {s.kind.ref.kind} keeps the status it has",
        )
    if status is None:
        return None
    return checked_write(s, obj, status)


def checked_write(s: Snapshot, obj: JsonObj, status: JsonObj) -> WriteStatus | Terminal:
    try:
        violations = s.kind.status_violations(obj, {**obj, "status": status})
    except UNREADABLE as error:
        violations = [f"{type(error).__name__}: {error}"]
    if violations:
        return Terminal(
            "StatusNotCopied",
            "jobrelay will not write a status the API rules refuse (a jobrelay bug, please "
            f"report it): {'; '.join(violations)}",
        )
    patch = merge_patch(obj.get("status") or {}, status)
    return WriteStatus(patch, version(obj), status)


def end_of_run(
    s: Snapshot, obj: JsonObj, vanished: JsonObj | None, cluster: str, actions: list[Action]
) -> Plan | WriteStatus | None:
    """The status once a run ended without finishing, before another starts.

    Nothing of it runs now; what a gone mirror did (its last state) counts; and
    if earlier runs already decided the outcome, the workload ends here instead
    of running again. Appends the write (and a finish Event) to ``actions``; a
    Plan when that ends the decision, else the write (None: nothing to write).
    """
    write = status_write(s, obj, vanished, gone=vanished is not None)
    if isinstance(write, Terminal):
        return Plan(tuple(actions), write)
    if write is None:
        return None
    actions.append(write)
    finish = s.kind.finish({**obj, "status": write.status})
    if finish is not None:
        event = finish_event(finish, cluster, completed_events=s.settings.completed_events)
        if event is not None:
            actions.append(event)
        return Plan(tuple(actions), Done(), release=True)
    return write


def vanished_mirror(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot) -> JsonObj | None:
    """The last state of this run's mirror on ``worker``, if it was deleted there."""
    vanished = worker.vanished
    if vanished is None or not is_current(s, obj, worker.name, vanished):
        return None
    return vanished
