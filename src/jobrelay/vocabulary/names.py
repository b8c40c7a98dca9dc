"""Names of the labels, annotations and values jobrelay writes on Jobs.

Everything a restarted controller needs lives in these keys on the apiservers:
the placement on the management Job, the origin on the mirror.
"""

from __future__ import annotations

import functools
import re

DEFAULT_CONTROLLER_NAME = "jobrelay.dev/relay"

# On the management Job: the worker cluster that holds (or held) its mirror.
CLUSTER_ANNOTATION = "jobrelay.dev/cluster"
# On the management Job: every worker it was placed on, in order, comma-separated;
# the last is the current one and the count numbers the current run.
PLACEMENTS_ANNOTATION = "jobrelay.dev/placements"
# On the management object, set by its user: where it may go (README "Placement").
CLUSTERS_ANNOTATION = "jobrelay.dev/clusters"
CLUSTER_SELECTOR_ANNOTATION = "jobrelay.dev/cluster-selector"
PLACEMENT_ANNOTATION = "jobrelay.dev/placement"
# On the management Job, set by its user: "never" keeps a lost Job from running again.
REDISPATCH_ANNOTATION = "jobrelay.dev/redispatch"
REDISPATCH_NEVER = "never"
# Move even a workload whose pods have started (its mirror is stuck Pending).
REDISPATCH_ALWAYS = "always"
# On the management object, written with a placement: each worker it moved away from
# after a worker-side failure there (kinds/pod_faults.py) and when, ``worker@RFC3339``
# comma-separated, oldest first; their count is weighed against its move budget.
WORKER_FAILURES_ANNOTATION = "jobrelay.dev/worker-failures"
# On the management object, set by its user: how many such moves it may make (a number;
# the controller's --max-moves when absent).
MAX_MOVES_ANNOTATION = "jobrelay.dev/max-moves"
# Why a workload is not placed yet, shown on the object itself (jobrelay writes it).
NOT_PLACED_ANNOTATION = "jobrelay.dev/not-placed"
# On the management object, written by jobrelay: the workload (``Kind namespace/name``)
# that preempted it. While it is placed, its mirror is deleted and its run ends; then it
# waits in its queue unplaced (its placements kept) until admitted again, which clears it.
PREEMPTED_BY_ANNOTATION = "jobrelay.dev/preempted-by"
# The RelayQueue a workload names (a label, so that queues and `kubectl get -l` select on it).
QUEUE_LABEL = "jobrelay.dev/queue"
# On the management object: why its mirror cannot create its pods, in its worker's
# words ("worker-1: FailedCreate: <message>"); removed once its pods run or it ends.
BLOCKED_ANNOTATION = "jobrelay.dev/blocked"

# On the management object: the UID of every mirror jobrelay created for it, by run
# ("<run>:<worker>:<uid>", comma-separated). Only a recorded mirror (or, once, the
# unrecorded one of the current run on its placed worker: objects placed before
# the record was kept, a restart between create and record) is ever followed.
MIRRORS_ANNOTATION = "jobrelay.dev/mirrors"
# On a workload restored from a backup (a new UID, while its recorded mirror was made
# for the old one): set by an admin, what to do with that mirror. "adopt": follow it
# (its origin-uid label is moved to the new UID); "stop": delete it (its pods first)
# and run the workload again. Removed by jobrelay once done (docs/operations.md).
RESTORED_ANNOTATION = "jobrelay.dev/restored"
RESTORED_ADOPT = "adopt"
RESTORED_STOP = "stop"
# On such a workload, written by jobrelay while it waits for that decision: why.
RESTORED_HELD_ANNOTATION = "jobrelay.dev/restored-held"
# The annotations that choose a workload's worker and the mirror it follows: only the
# controller may set or change them (the chart's admission policies, the output of
# jobrelay.manifests.admission_policy).
PLACEMENT_KEYS = (
    CLUSTER_ANNOTATION,
    PLACEMENTS_ANNOTATION,
    MIRRORS_ANNOTATION,
    WORKER_FAILURES_ANNOTATION,
)

# On the mirror: which run of its management Job it is (1 for the first placement),
# so that a mirror left on a worker the Job moved away from is never mistaken for
# the current one.
RUN_ANNOTATION = "jobrelay.dev/run"
# On the mirror: what earlier runs did (JSON, kind-specific), added to its status.
CARRIED_OVER_ANNOTATION = "jobrelay.dev/carried-over"

# On the mirror: which controller created it, for which management Job.
MIRROR_LABEL = "jobrelay.dev/mirror"  # value: controller_label_value(controller name)
ORIGIN_UID_LABEL = "jobrelay.dev/origin-uid"  # value: the management Job's metadata.uid
CONTROLLER_ANNOTATION = "jobrelay.dev/controller"  # value: the controller name, verbatim
# On the mirror: the origin, which management cluster made it (--origin; by default the
# UID of that cluster's kube-system namespace). Two managers sharing a worker only
# ever see, adopt, copy or delete mirrors of their own origin.
ORIGIN_LABEL = "jobrelay.dev/origin"

# On a ConfigMap, Secret or ServiceAccount jobrelay copied onto a worker for the workloads
# that reference it (dependencies/copy_rules.py): which controller made it (with
# ORIGIN_LABEL, the selector of the worker's caches of copies), the source's UID on the
# manager and a digest of the content copied (a change on the manager is synced).
COPY_LABEL = "jobrelay.dev/copy"  # value: controller_label_value(controller name)
SOURCE_UID_ANNOTATION = "jobrelay.dev/source-uid"
DIGEST_ANNOTATION = "jobrelay.dev/digest"

# The only keys under jobrelay.dev/ a user may set on a workload: documented in the
# README, read by placement, harmless on a mirror. Every other jobrelay.dev/ key is
# jobrelay's own record (run, carried-over, origin, placements, mirrors...): written by
# jobrelay alone, never copied from what a user wrote onto a mirror.
USER_FACING_KEYS = frozenset(
    {
        CLUSTERS_ANNOTATION,
        CLUSTER_SELECTOR_ANNOTATION,
        PLACEMENT_ANNOTATION,
        REDISPATCH_ANNOTATION,
        MAX_MOVES_ANNOTATION,
    }
)
_OWN_PREFIX = "jobrelay.dev/"


def is_own_mark(key: str) -> bool:
    """Whether a label or annotation key is one of jobrelay's own records (not user-facing)."""
    return key.startswith(_OWN_PREFIX) and key not in USER_FACING_KEYS


FIELD_MANAGER = "jobrelay"

# On the leader election Lease, written by the leader with each renewal: its version (for
# `jobrelay version`) and its kinds, Kind.version.group comma-separated (for `jobrelay get`).
VERSION_ANNOTATION = "jobrelay.dev/version"
KINDS_ANNOTATION = "jobrelay.dev/kinds"

_LABEL_VALUE_INVALID = re.compile(r"[^A-Za-z0-9._-]")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def origin_problem(origin: str) -> str | None:
    """Why ``origin`` cannot name a management cluster on mirrors (None: it can).

    It is a label value, so that each manager's caches select only its own mirrors.
    """
    if _LABEL_VALUE.match(origin):
        return None
    return (
        f"origin {origin[:80]!r} is not a label value: at most 63 letters, digits, '.', '_' "
        "or '-', starting and ending with a letter or digit"
    )


def mirror_selector(controller_name: str, origin: str) -> str:
    """The label selector of the mirrors one controller of one origin created (on any worker)."""
    return f"{MIRROR_LABEL}={controller_label_value(controller_name)},{ORIGIN_LABEL}={origin}"


@functools.lru_cache(maxsize=64)
def controller_label_value(controller_name: str) -> str:
    """A label-safe form of a controller name (``jobrelay.dev/relay`` -> ``jobrelay.dev.relay``).

    managedBy is at most 63 characters, as is a label value, so only the ``/``
    and other path characters need replacing.
    """
    value = _LABEL_VALUE_INVALID.sub(".", controller_name)[:63]
    return value.strip("._-") or "jobrelay"


def copy_selector(controller_name: str, origin: str) -> str:
    """The label selector of the dependency copies one controller of one origin made."""
    return f"{COPY_LABEL}={controller_label_value(controller_name)},{ORIGIN_LABEL}={origin}"
