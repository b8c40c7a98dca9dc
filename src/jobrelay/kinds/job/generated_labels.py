"""What the management apiserver generates on each Job, and the cache leaves out.

Creating a Job without ``manualSelector``, the apiserver writes a selector of its UID and
four labels on its pod template: ``job-name`` and ``controller-uid`` in both spellings,
of its name and its UID. They differ per Job, no mirror carries them (the worker writes
its own) and no decision reads them, so the management cache keeps neither: Jobs made
from one template then have equal specs, which the cache shares. The manager
admission's probe pods, made from the cached template, no longer carry them either: the
pods of Jobs alike are then alike, and asked about once (controller/relay/admission.py),
as its tests always assumed; the pods that run carry the worker's own.
"""

from __future__ import annotations

from jobrelay.kinds.job.pod_labels import (
    JOB_NAME_LABEL,
    JOB_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    LEGACY_JOB_UID_LABEL,
)
from jobrelay.vocabulary.json_types import JsonObj

__all__ = ["generated_labels", "without_generated"]


def generated_labels(job: JsonObj) -> dict[str, str]:
    """The template labels the apiserver generates for ``job`` (none with manualSelector,
    or without a name and UID to write)."""
    spec = job.get("spec")
    metadata = job.get("metadata")
    if not isinstance(spec, dict) or not isinstance(metadata, dict):
        return {}
    name, uid = metadata.get("name"), metadata.get("uid")
    if spec.get("manualSelector") is True or not name or not uid:
        return {}
    return {
        LEGACY_JOB_NAME_LABEL: name,
        JOB_NAME_LABEL: name,
        LEGACY_JOB_UID_LABEL: uid,
        JOB_UID_LABEL: uid,
    }


def _template_labels(spec: JsonObj) -> tuple[JsonObj | None, JsonObj | None, object]:
    template = spec.get("template")
    metadata = template.get("metadata") if isinstance(template, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return template, metadata, labels


def without_generated(job: JsonObj) -> JsonObj:
    """``job`` without its selector, and without its template's generated labels when all
    four are there as generated (one a user set to another value keeps them all): a copy
    along the way, ``job`` itself when there is nothing to drop."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return job
    template, metadata, labels = _template_labels(spec)
    generated = generated_labels(job)
    drop = (
        bool(generated)
        and isinstance(labels, dict)
        and all(labels.get(k) == v for k, v in generated.items())
    )
    if "selector" not in spec and not drop:
        return job
    slim_spec = {k: v for k, v in spec.items() if k != "selector"}
    if drop:
        assert isinstance(template, dict) and isinstance(metadata, dict)
        assert isinstance(labels, dict)
        slim_metadata = {k: v for k, v in metadata.items() if k != "labels"}
        if user := {k: v for k, v in labels.items() if k not in generated}:
            slim_metadata["labels"] = user
        slim_spec["template"] = {**template, "metadata": slim_metadata}
    return {**job, "spec": slim_spec}
