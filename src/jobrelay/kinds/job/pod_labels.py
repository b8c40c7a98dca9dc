"""The labels the built-in Job controller writes on a Job's pods (and its pod template).

The owner's name and UID, each in two spellings: the ``batch.kubernetes.io/`` one, and
the unprefixed one older clusters write alone. An Indexed Job's pods carry their
completion index.
"""

from __future__ import annotations

from jobrelay.kinds.pod_ownership import PodOwnerLabels

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_JOB_UID_LABEL = "controller-uid"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

JOB_POD_OWNER = PodOwnerLabels(
    (JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL), (JOB_UID_LABEL, LEGACY_JOB_UID_LABEL)
)

# Labels the management cluster's apiserver and controller generate; never copied to a
# mirror (the worker's write their own).
GENERATED_JOB_LABELS = frozenset(
    {LEGACY_JOB_UID_LABEL, JOB_UID_LABEL, LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL}
)


def job_pod_selector(uid: str) -> str:
    """The label selector of the pods of the Job whose UID is ``uid``."""
    return f"{JOB_UID_LABEL}={uid}"
