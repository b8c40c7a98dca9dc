"""What `jobrelay simulate -f FILE` reads (pure): one or more YAML or JSON documents, a
List's items among them, each a workload of a kind jobrelay runs; and how it says the
verdicts (text, or the documents of ``-o json|yaml``).

Anything else is bad input: a :class:`BadManifest` whose message says what and where,
which the command turns into a usage error (exit 2), never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobrelay.admission.dry_run_rules import DryRunVerdict
from jobrelay.admission.start_estimate import StartEstimate
from jobrelay.kinds.base import WorkloadKind
from jobrelay.readmodel.estimate_reads import estimate_line, estimated_time

__all__ = [
    "MAX_WORKLOADS",
    "BadManifest",
    "SimulatedWorkload",
    "check_shape",
    "kind_for",
    "read_manifests",
    "verdict_document",
    "verdict_lines",
]

MAX_WORKLOADS = 1000  # a dry run is for a few workloads, not a cluster's worth


class BadManifest(ValueError):
    """Input `simulate` cannot judge; the message says what is wrong and where."""


def read_manifests(text: str, source: str) -> list[dict[str, Any]]:
    """The objects of ``text`` (YAML or JSON, ``---``-separated documents, Lists
    expanded), in order."""
    import yaml

    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise BadManifest(f"{source}: not YAML or JSON{at}") from None
    found: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        if not isinstance(document, Mapping):
            raise BadManifest(f"{source}: document {number} is not an object")
        items = document.get("items")
        if str(document.get("kind") or "").endswith("List") and isinstance(items, list):
            for item in items:
                if not isinstance(item, Mapping):
                    raise BadManifest(f"{source}: document {number} lists an item that is not an object")  # fmt: skip
                found.append(dict(item))
        else:
            found.append(dict(document))
    if not found:
        raise BadManifest(f"{source}: no workload in it")
    if len(found) > MAX_WORKLOADS:
        raise BadManifest(f"{source}: {len(found)} workloads, more than {MAX_WORKLOADS}")
    return found


# Core kinds that are never a workload jobrelay runs: refused before asking the manager.
_NOT_WORKLOADS = frozenset({"Pod", "ConfigMap", "Secret", "Service", "Namespace",
                            "PersistentVolumeClaim", "ServiceAccount"})  # fmt: skip


def check_shape(obj: Mapping[str, Any], source: str) -> tuple[str, str, str]:
    """``obj``'s kind, apiVersion and name; BadManifest when one is missing, or for a core
    kind that is no workload (told before anything is asked of the manager)."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(kind, str) or not kind or not isinstance(api_version, str):
        raise BadManifest(f"{source}: an object without apiVersion and kind")
    if not isinstance(name, str) or not name:
        raise BadManifest(f"{source}: a {kind} without metadata.name")
    if kind in _NOT_WORKLOADS and api_version == "v1":
        raise BadManifest(f"{source}: {kind} {name} ({api_version}) is not a kind jobrelay runs")
    return kind, api_version, name


def kind_for(obj: Mapping[str, Any], kinds: Sequence[WorkloadKind], source: str) -> WorkloadKind:
    """The kind jobrelay runs that ``obj`` is; BadManifest when it runs no such kind."""
    kind, api_version, name = check_shape(obj, source)
    for candidate in kinds:
        if candidate.ref.kind == kind and candidate.ref.api_version == api_version:
            return candidate
    runs = ", ".join(f"{k.ref.kind} ({k.ref.api_version})" for k in kinds)
    raise BadManifest(f"{source}: {kind} {name} ({api_version}) is not a kind jobrelay runs here (it runs {runs})")  # fmt: skip


@dataclass(frozen=True, slots=True)
class SimulatedWorkload:
    """One workload judged: what it is, the verdict, its estimate."""

    kind: WorkloadKind
    namespace: str
    name: str
    verdict: DryRunVerdict
    estimate: StartEstimate | None


def verdict_lines(judged: SimulatedWorkload, now: datetime) -> list[str]:
    """The text `simulate` prints of one workload."""
    verdict = judged.verdict
    lines = [f"{judged.kind.ref.kind.lower()}/{judged.name} (namespace {judged.namespace}):"]
    lines.append(f"  queue:            {verdict.queue or '-'}")
    hold = verdict.hold
    if verdict.never and hold is not None:
        lines.append(f"  admitted now:     no; it can never run: {hold.reason}: {hold.message}")
    elif verdict.admitted_now:
        lines.append("  admitted now:     yes")
    else:
        why = f"{hold.reason}: {hold.message}" if hold is not None else "it waits for its turn"
        lines.append(f"  admitted now:     no ({why})")
    lines.append(f"  worker:           {verdict.worker or '-'}")
    if verdict.refusals and verdict.worker is None:
        lines.append("  workers refusing:")
        lines.extend(f"    {r.worker}: {r.reason}" for r in verdict.refusals)
    elif verdict.refusals:
        lines.append("  passed over:")
        lines.extend(f"    {r.worker}: {r.reason}" for r in verdict.refusals)
    if judged.estimate is not None:
        lines.append(f"  estimated start:  {estimate_line(judged.estimate, now)}")
    return lines


def verdict_document(judged: SimulatedWorkload) -> dict[str, Any]:
    """One workload's verdict as ``-o json|yaml`` prints it."""
    verdict, estimate = judged.verdict, judged.estimate
    hold = verdict.hold
    return {
        "kind": judged.kind.ref.kind,
        "apiVersion": judged.kind.ref.api_version,
        "namespace": judged.namespace,
        "name": judged.name,
        "queue": verdict.queue or None,
        "admittedNow": verdict.admitted_now,
        "worker": verdict.worker,
        "refusals": [{"worker": r.worker, "reason": r.reason} for r in verdict.refusals],
        "neverRuns": verdict.never,
        "reason": hold.reason if hold is not None else None,
        "message": hold.message if hold is not None else None,
        "estimatedStart": estimated_time(estimate),
        "estimatedWorker": (estimate.worker or None) if estimate is not None else None,
        "estimateBasis": estimate.basis if estimate is not None else None,
    }
