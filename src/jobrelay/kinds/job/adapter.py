"""The batch/v1 Job adapter: today's Job logic behind the WorkloadKind interface."""

from __future__ import annotations

from jobrelay.kinds.base import Finish, PodSet, WorkloadKind
from jobrelay.kinds.job import conditions, contract, mirror, spec, status
from jobrelay.kinds.job.generated_labels import without_generated
from jobrelay.kinds.job.pod_labels import COMPLETION_INDEX_LABEL, JOB_POD_OWNER, job_pod_selector
from jobrelay.kinds.mirrors import slim_metadata
from jobrelay.kinds.pods import pod_requests
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource


class JobKind(WorkloadKind):
    ref = Resource("batch", "v1", "jobs", "Job")
    # Its pods: its controller's, with its name and UID labels (pod_labels.py).
    pod_owner_labels = (JOB_POD_OWNER,)
    pod_index_labels = (COMPLETION_INDEX_LABEL,)

    def slim_local(self, obj: JsonObj) -> JsonObj:
        # Besides the base's: the selector and the template labels the apiserver
        # generates per Job (generated_labels.py): Jobs of one template then share it.
        return without_generated(super().slim_local(obj))

    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        # The pod template is most of a Job's bytes; only its scheduling
        # directives are compared (to follow edits of a suspended Job).
        mirror_spec = dict(obj.get("spec") or {})
        template = mirror_spec.pop("template", None)
        if template is not None:
            mirror_spec["template"] = mirror.scheduling_directives(template)
        return {
            "metadata": slim_metadata(obj),
            "spec": mirror_spec,
            "status": obj.get("status") or {},
        }

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        return mirror.build_mirror(
            obj, controller_name=controller_name, origin=origin, run=run, now=now
        )

    def spec_patch(self, obj: JsonObj, mirror_obj: JsonObj) -> JsonObj | None:
        return mirror.mirror_spec_patch(obj, mirror_obj)

    def next_status(
        self, obj: JsonObj, mirror_obj: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        return status.next_status(obj, mirror_obj, now=now, gone=gone)

    def failed_status(self, obj: JsonObj, reason: str, message: str, *, now: str) -> JsonObj | None:
        return status.failed_status(obj, reason, message, now=now)

    def is_transitional(self, old: JsonObj, new: JsonObj) -> bool:
        return status.is_transitional(old.get("status") or {}, new.get("status") or {})

    def status_violations(self, old: JsonObj, new: JsonObj) -> list[str]:
        return contract.status_violations(old, new)

    def finish(self, obj: JsonObj) -> Finish | None:
        final = conditions.finished_condition(obj)
        if final is None:
            return None
        succeeded = final.get("type") == conditions.COMPLETE
        # A complete Job's completionTime; a failed one's has none (its condition's time).
        completed = (obj.get("status") or {}).get("completionTime") if succeeded else None
        return Finish(
            succeeded=succeeded,
            reason=str(final.get("reason") or ""),
            message=str(final.get("message") or ""),
            at=str(completed or final.get("lastTransitionTime") or ""),
        )

    def is_finished(self, obj: JsonObj) -> bool:
        # As finish() is not None, without building the Finish: asked several times a reconcile.
        return conditions.finished_condition(obj) is not None

    def is_suspended(self, obj: JsonObj) -> bool:
        return spec.is_suspended(obj)

    def has_run(self, obj: JsonObj) -> bool:
        current = obj.get("status") or {}
        return bool(current.get("startTime") or current.get("succeeded") or current.get("failed"))

    def shows_running(self, obj: JsonObj) -> bool:
        current = obj.get("status") or {}
        return bool(current.get("active") or current.get("ready"))

    def has_started(self, mirror_obj: JsonObj) -> bool:
        # startTime comes with the first sync, before any pod is scheduled: a pod that
        # became ready or ended is what shows work began.
        current = mirror_obj.get("status") or {}
        return bool(current.get("ready") or current.get("succeeded") or current.get("failed"))

    def pod_templates(self, obj: JsonObj) -> list[JsonObj]:
        template = (obj.get("spec") or {}).get("template")
        return [template] if isinstance(template, dict) else []

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        job_spec = obj.get("spec") or {}
        parallelism = job_spec.get("parallelism", 1)
        completions = job_spec.get("completions")
        count = parallelism if completions is None else min(parallelism, completions)
        pod_spec = (job_spec.get("template") or {}).get("spec") or {}
        return [
            PodSet(
                name="main",
                count=int(count),
                requests=pod_requests(pod_spec),
                node_selector=dict(pod_spec.get("nodeSelector") or {}),
            )
        ]

    # -- its pods on the worker ---------------------------------------------------------

    def pod_selectors(self, mirror_obj: JsonObj) -> tuple[str, ...]:
        return (job_pod_selector(Meta(mirror_obj).uid),)

    def pods_at_work(self, obj: JsonObj) -> bool:
        current = obj.get("status") or {}
        return any(_positive(current.get(k)) for k in ("active", "ready", "succeeded"))

    def completions(self, obj: JsonObj) -> str:
        """``succeeded/completions`` as kubectl prints it (``/1 of N`` for a work queue)."""
        job_spec, current = obj.get("spec") or {}, obj.get("status") or {}
        succeeded = int(current.get("succeeded") or 0)
        if job_spec.get("completions") is not None:
            return f"{succeeded}/{job_spec['completions']}"
        parallelism = int(job_spec.get("parallelism") or 1)
        return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _positive(value: object) -> bool:
    return isinstance(value, int) and value > 0
