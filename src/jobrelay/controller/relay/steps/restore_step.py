"""First step: a workload restored from a backup while its mirror runs. Pure.

A restored workload has a new UID; its mirror still runs on its worker, labelled with
the old one (kinds/restored.py tells it). To the other steps that mirror is an earlier
object's, deleted before the workload runs again: its work lost, then done twice,
silently. So nothing happens to it, and nothing new is dispatched, until an admin sets
the annotation ``jobrelay.dev/restored`` on the workload:

- ``adopt``: the mirror's ``jobrelay.dev/origin-uid`` label is moved to the new UID (a
  patch preconditioned on the mirror's UID); it is then the recorded mirror, followed to
  its end like any other;
- ``stop``: the mirror is deleted, its pods first; then the workload runs again from
  its start (the mirror step forgets the gone mirror's record and creates one).

Until then the workload is held: a Warning Event ``RestoredMirror`` and the annotation
``jobrelay.dev/restored-held`` say which command to run. A workload backed up before its
mirror was recorded (it had run less than 30 s) is recognised by its placement alone
(jobrelay's, on that mirror's worker and run; a namesake created again is placed only
after its predecessor's mirror is being deleted). Once no such mirror is left, both
annotations are removed. A deleted (or finished) workload's mirrors go as always.
"""

from __future__ import annotations

from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    Done,
    Log,
    PatchMirror,
    ReadFresh,
    RecordEvent,
    Retry,
)
from jobrelay.controller.relay.refusal_wording import MIRROR_UPDATE_REJECTED
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.facts import meta, name, namespace, uid
from jobrelay.controller.relay.steps.plan_parts import delete, warning
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer
from jobrelay.kinds.mirrors import origin_uid, run_of
from jobrelay.kinds.restored import is_restored_mirror
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import annotations_of
from jobrelay.vocabulary.names import (
    ORIGIN_UID_LABEL,
    RESTORED_ADOPT,
    RESTORED_ANNOTATION,
    RESTORED_HELD_ANNOTATION,
    RESTORED_STOP,
)

__all__ = ["RestoreStep", "restored_held_message"]

Restored = list[tuple[WorkerSnapshot, JsonObj]]


class RestoreStep:
    name = "restore"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj = s.obj
        if obj is None or meta(obj).get("deletionTimestamp") or s.kind.is_finished(obj):
            return Continue()  # its mirrors go with it (deletions step)
        annotations = annotations_of(obj)
        decision = str(annotations.get(RESTORED_ANNOTATION) or "").strip()
        restored: Restored = [
            (worker, seen)
            for worker in s.workers
            if (seen := worker.seen) is not None
            and is_restored_mirror(
                obj,
                worker.name,
                seen,
                controller_name=s.settings.controller_name,
                origin=s.settings.origin,
                vouched=decision in (RESTORED_ADOPT, RESTORED_STOP),
                going=uid(seen) in s.deleting,
            )
        ]
        if not restored:
            return _settled(s, obj, progress)
        if decision in (RESTORED_ADOPT, RESTORED_STOP):
            if not s.fresh:  # the admin's word, as the apiserver has it now
                return progress.plan(ReadFresh(obj=True))
            if any(not worker.connected for worker, _ in restored):
                return progress.plan(Retry("the worker of its restored mirror does not answer"))
            if decision == RESTORED_ADOPT:
                return _adopt(s, obj, restored, progress)
            return _stop(s, obj, restored, progress)
        message = restored_held_message(s, obj, restored, decision)
        if annotations.get(RESTORED_HELD_ANNOTATION) != message:  # told once
            progress.actions.append(Annotate({RESTORED_HELD_ANNOTATION: message}))
            progress.actions.extend(warning("RestoredMirror", message))
        # The admin's annotation (a watch event) or the mirror's own changes bring it back.
        return progress.plan(Done())


def restored_held_message(s: Snapshot, obj: JsonObj, restored: Restored, decision: str) -> str:
    """Why a restored workload waits, and the commands that decide."""
    worker, mirror = restored[0]
    ref = s.kind.ref
    target = f"{ref.plural}.{ref.group}/{name(obj)}" if ref.group else f"{ref.plural}/{name(obj)}"
    command = f"kubectl annotate -n {namespace(obj)} {target} {RESTORED_ANNOTATION}="
    wrong = (
        f"{RESTORED_ANNOTATION}={decision[:40]!r} is neither {RESTORED_ADOPT} nor {RESTORED_STOP}; "
        if decision
        else ""
    )
    return (
        f"{wrong}restored with a new UID while its mirror on worker cluster {worker.name} "
        f"(uid {uid(mirror)}, run {run_of(mirror)}) still runs for its old UID "
        f"{origin_uid(mirror)}: nothing runs again and that mirror is neither followed nor "
        f"deleted until you decide. Follow it: `{command}{RESTORED_ADOPT} --overwrite`; or "
        f"stop it and run again: `{command}{RESTORED_STOP} --overwrite` (docs/operations.md, "
        f"Disaster recovery)"
    )


def _adopt(s: Snapshot, obj: JsonObj, restored: Restored, progress: Progress) -> StepAnswer:
    new_uid = str(meta(obj).get("uid"))
    for worker, mirror in restored:
        # The UID in the patch is a precondition: never a newer namesake's labels.
        patch = {"metadata": {"uid": uid(mirror), "labels": {ORIGIN_UID_LABEL: new_uid}}}
        progress.actions.append(
            PatchMirror(
                worker.name,
                name(mirror),
                namespace(mirror),
                patch,
                if_refused=MIRROR_UPDATE_REJECTED,
            )
        )
        message = (
            f"adopted its mirror on worker cluster {worker.name} (uid {uid(mirror)}, run "
            f"{run_of(mirror)}), made for its old UID {origin_uid(mirror)}: followed from now on"
        )
        progress.actions.extend(_told("MirrorAdopted", message))
    return progress.plan(Done())  # the mirror's watch event brings it back


def _stop(s: Snapshot, obj: JsonObj, restored: Restored, progress: Progress) -> StepAnswer:
    for worker, mirror in restored:
        if meta(mirror).get("deletionTimestamp") or uid(mirror) in s.deleting:
            continue
        why = f"its {s.kind.ref.kind} was restored and {RESTORED_ANNOTATION}={RESTORED_STOP}"
        progress.actions.append(delete(worker.name, mirror, why, wait_for_pods=True))
        message = (
            f"stopping its restored mirror on worker cluster {worker.name} (uid "
            f"{uid(mirror)}, run {run_of(mirror)}); it runs again once that one is gone"
        )
        progress.actions.extend(_told("RestoredMirrorStopped", message))
    return progress.plan(Retry("waiting for its restored mirror to be gone"))


def _settled(s: Snapshot, obj: JsonObj, progress: Progress) -> StepAnswer:
    """No restored mirror (left): the admin's and jobrelay's annotations go, once every
    worker is seen whole (one not listed or not answering may still hold one)."""
    annotations = annotations_of(obj)
    keys = [k for k in (RESTORED_ANNOTATION, RESTORED_HELD_ANNOTATION) if k in annotations]
    if not keys:
        return Continue()
    if any(not worker.synced or not worker.connected for worker in s.workers):
        return Continue()  # kept, harmless, until every worker shows what it holds
    progress.actions.append(Annotate(dict.fromkeys(keys)))
    return progress.plan(Done())  # its own watch event brings it back


def _told(reason: str, message: str) -> tuple[Action, ...]:
    return RecordEvent("Normal", reason, message), Log("info", message)
