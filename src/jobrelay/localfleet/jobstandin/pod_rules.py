"""A simulated pod's life on a light worker (pure): Running once it has a node, then
Succeeded or Failed after the duration its annotations ask for, as the local fleet's
kwok stages (kwok-stages.yaml) run the pods of full workers:

- ``fleet.jobrelay.dev/duration``: how long the pod runs (Go duration, default 1s);
- ``fleet.jobrelay.dev/outcome``: ``succeed`` (default), ``fail`` or ``run-forever``;
- ``fleet.jobrelay.dev/exit-code``: every container's exit code when it fails (default 1).

Pods with ``restartPolicy: Always`` keep running.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.timestamps import parse_time, rfc3339

DURATION_ANNOTATION = "fleet.jobrelay.dev/duration"
OUTCOME_ANNOTATION = "fleet.jobrelay.dev/outcome"
EXIT_CODE_ANNOTATION = "fleet.jobrelay.dev/exit-code"
DEFAULT_DURATION = 1.0
RUNNING, SUCCEEDED, FAILED, PENDING = "Running", "Succeeded", "Failed", "Pending"
TERMINAL = frozenset({SUCCEEDED, FAILED})
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}  # fmt: skip


def go_duration_seconds(text: object) -> float | None:
    """A Go duration (``1h2m3.5s``, ``200ms``, ``0``) in seconds; None when it is not one."""
    if not isinstance(text, str) or not text:
        return None
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return total if position == len(text) else None


@dataclass(frozen=True)
class PodStep:
    """The status to write next (None: nothing), after how many seconds to look again
    (None: only on a change), and whether to remove the pod (it is being deleted: there
    is no kubelet to confirm it)."""

    status: dict[str, Any] | None = None
    recheck_after: float | None = None
    remove: bool = False


def phase_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or PENDING)


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("containers") or [])


def _conditions(now: str, ready: bool, reason: str | None) -> list[dict[str, Any]]:
    flag = "True" if ready else "False"
    return [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
        *(
            {"type": kind, "status": flag, "lastTransitionTime": now}
            | ({"reason": reason} if reason else {})
            for kind in ("ContainersReady", "Ready")
        ),
    ]


def running_status(pod: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any]:
    stamp = rfc3339(now)
    return {
        "phase": RUNNING,
        "conditions": _conditions(stamp, True, None),
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "startTime": stamp,
        "containerStatuses": [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": stamp}},
            }
            for c in _containers(pod)
        ],
    }


def finished_status(
    pod: Mapping[str, Any], now: datetime.datetime, *, failed: bool, exit_code: int
) -> dict[str, Any]:
    status = dict(pod.get("status") or {})
    stamp = rfc3339(now)
    started = status.get("startTime") or stamp
    code = exit_code if failed else 0
    return status | {
        "phase": FAILED if failed else SUCCEEDED,
        "conditions": _conditions(stamp, False, "PodFailed" if failed else "PodCompleted"),
        "containerStatuses": [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Error" if failed else "Completed",
                        "startedAt": started,
                        "finishedAt": stamp,
                    }
                },
            }
            for c in _containers(pod)
        ],
    }


def _exit_code(annotations: Mapping[str, Any]) -> int:
    try:
        code = int(annotations.get(EXIT_CODE_ANNOTATION, 1))
    except (TypeError, ValueError):
        return 1
    return code if 0 < code < 256 else 1


def pod_step(
    pod: Mapping[str, Any], now: datetime.datetime, started: datetime.datetime | None = None
) -> PodStep:
    """What happens next to ``pod`` at ``now`` on a light worker; ``started``: when it was
    made Running, if known more precisely than its startTime."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return PodStep(remove=True)
    spec = pod.get("spec") or {}
    phase = phase_of(pod)
    if not spec.get("nodeName") or phase in TERMINAL:
        return PodStep()
    if phase != RUNNING:
        return PodStep(status=running_status(pod, now))
    annotations = meta.get("annotations") or {}
    outcome = annotations.get(OUTCOME_ANNOTATION)
    if spec.get("restartPolicy") == "Always" or outcome == "run-forever":
        return PodStep()
    duration = go_duration_seconds(annotations.get(DURATION_ANNOTATION))
    duration = DEFAULT_DURATION if duration is None else duration
    if started is None:
        # startTime is stored to the second: count from the end of that second, so that
        # a pod never ends before its duration.
        stored = parse_time((pod.get("status") or {}).get("startTime")) or now
        started = stored + datetime.timedelta(seconds=1)
    remaining = (started - now).total_seconds() + duration
    if remaining > 0:
        return PodStep(recheck_after=math.ceil(remaining * 1000) / 1000)
    failed = outcome == "fail"
    return PodStep(
        status=finished_status(pod, now, failed=failed, exit_code=_exit_code(annotations))
    )
