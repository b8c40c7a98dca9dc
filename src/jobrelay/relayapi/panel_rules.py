"""The panel's read models and their watch streams (pure: no I/O, no clock).

The dashboard, and anyone with ``kubectl get --raw``, reads three views of what the
controller's caches hold, each a list of rows with a stable id:

* ``fleet``: one row per WorkerCluster (health, capacity and usage, mirrors, running);
* ``queues``: one row per RelayQueue (weight, quota, usage, shares), from its status;
* ``workloads``: one row per managed workload (state and why, placement history, queue).

A watch (``?watch=true``) sends Kubernetes-style events, one JSON object per line:
``{"type": "ADDED"|"MODIFIED"|"DELETED", "object": row}``; :func:`changes` says which
rows changed between two snapshots, so a change is computed and encoded once however
many viewers watch. Rows never carry a worker's address or credentials. The routes
of the panel and its static files are matched here too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.standing import State
from jobrelay.readmodel import queue_rows, worker_rows, workload_rows
from jobrelay.relayapi.route_rules import API_GROUP, API_PATH, API_VERSION, scrub
from jobrelay.vocabulary.meta import Meta

__all__ = [
    "DASHBOARD",
    "DASHBOARD_BARE",
    "DASHBOARD_POLICY",
    "EVENTS",
    "FLEET",
    "QUEUES",
    "WORKLOADS",
    "PanelRoute",
    "Row",
    "WatchChange",
    "asset",
    "changes",
    "event_row",
    "list_body",
    "match_panel_route",
    "queue_row",
    "running_by_worker",
    "watch_line",
    "worker_row",
    "workload_row",
]

FLEET: Final = "fleet"
QUEUES: Final = "queues"
WORKLOADS: Final = "workloads"
EVENTS: Final = "events"
DASHBOARD: Final = "dashboard"

Row = dict[str, Any]
View = Literal["fleet", "queues", "workloads"]

# The list kinds of the three views (what a list answer's "kind" says).
_LIST_KINDS = {FLEET: "FleetView", QUEUES: "QueueView", WORKLOADS: "WorkloadView"}

# A reason or message shown in a row is cut to this many characters.
_MAX_TEXT = 1024


@dataclass(frozen=True, slots=True)
class PanelRoute:
    """A panel request: a view (all namespaces, or one), a workload's Events, or a file
    of the dashboard."""

    what: Literal["fleet", "queues", "workloads", "events", "dashboard"]
    namespace: str = ""
    plural: str = ""
    name: str = ""  # the workload (events), or the dashboard's file


_DNS_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_VIEW = re.compile(rf"^{re.escape(API_PATH)}/(?P<what>fleet|queues|workloads)/?$")
_NAMESPACED_VIEW = re.compile(
    rf"^{re.escape(API_PATH)}/namespaces/(?P<ns>{_DNS_NAME})/workloads/?$"
)
_EVENTS = re.compile(
    rf"^{re.escape(API_PATH)}/namespaces/(?P<ns>{_DNS_NAME})"
    rf"/(?P<plural>[a-z0-9][-a-z0-9.]{{0,62}})/(?P<name>{_DNS_NAME})/events$"
)
_DASHBOARD = re.compile(
    rf"^{re.escape(API_PATH)}/dashboard(?P<slash>/(?P<file>[a-z0-9][-a-z0-9.]*)?)?$"
)
# The dashboard's path without its slash (answered with a redirect to the directory).
DASHBOARD_BARE = "."


def match_panel_route(path: str) -> PanelRoute | None:
    """The panel route of ``path``, None when it is none of them."""
    if found := _VIEW.match(path):
        what: Literal["fleet", "queues", "workloads"] = found["what"]  # type: ignore[assignment]
        return PanelRoute(what)
    if found := _NAMESPACED_VIEW.match(path):
        return PanelRoute(WORKLOADS, namespace=found["ns"])
    if found := _EVENTS.match(path):
        return PanelRoute(EVENTS, found["ns"], found["plural"], found["name"])
    if found := _DASHBOARD.match(path):
        bare = "" if found["slash"] else DASHBOARD_BARE
        return PanelRoute(DASHBOARD, name=found["file"] or bare)
    return None


# The dashboard's files: name -> content type. "" is the page itself (the directory).
_ASSETS = {
    "": ("index.html", "text/html; charset=utf-8"),
    "index.html": ("index.html", "text/html; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "style.css": ("style.css", "text/css; charset=utf-8"),
}
# The page runs only its own files and talks only to its own origin (the proxy).
DASHBOARD_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def asset(name: str) -> tuple[str, str] | None:
    """The packaged file and content type of the dashboard's ``name``, None if unknown."""
    return _ASSETS.get(name)


# -- the rows -----------------------------------------------------------------------


def _text(value: object) -> str:
    return scrub(str(value or ""))[:_MAX_TEXT]


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def worker_row(registration: Mapping[str, Any], running: int) -> Row:
    """A WorkerCluster as the panel shows it (``running``: its workloads running now)."""
    row = worker_rows.worker_row(registration)
    view = row.view
    return {
        "name": view.name,
        "connected": view.connected,
        "state": row.state,
        "cordoned": view.cordoned,
        "draining": view.drain is not None,
        "lost": view.lost_time is not None,
        "message": _text(row.message),
        "version": _text(row.version)[:64],
        "mirrors": view.active_mirrors,
        "running": running,
        "nodes": row.nodes or 0,
        "schedulableNodes": row.schedulable_nodes or 0,
        "resources": [
            {"name": use.name, "used": use.used, "allocatable": use.allocatable, "text": use.text}
            for use in row.resources.values()
        ],
    }


def queue_row(queue: Mapping[str, Any]) -> Row:
    """A RelayQueue as the panel shows it, from its spec and the status the leader wrote."""
    row = queue_rows.queue_row(queue)
    return {
        "name": row.name,
        "weight": row.weight,
        "valid": row.valid,
        "message": _text(row.message),
        "pending": row.pending or 0,
        "admitted": row.admitted or 0,
        "usage": row.usage,
        "demand": row.demand,
        "nominalQuota": row.nominal_quota,
        "borrowingLimit": row.borrowing_limit,
        "fairShare": row.fair_share,
        "actualShare": row.actual_share,
    }


def workload_row(
    kind: WorkloadKind,
    obj: Mapping[str, Any],
    *,
    queue: str | None = None,
    estimate: tuple[str | None, str] | None = None,
) -> Row:
    """A managed workload as the panel shows it: its state (the one every command
    says), why, where it runs and where it ran, its RelayQueue (``queue``, as admission
    chose it; else its label); while it waits, its estimated start (``estimate``: RFC 3339
    or None when unknown, and its basis; None: not waiting)."""
    row = workload_rows.workload_row(kind, obj, queue=queue)
    start, basis = estimate if estimate is not None else (None, None)
    return {
        "key": f"{row.plural}/{row.namespace}/{row.name}",
        "kind": row.kind,
        "plural": row.plural,
        "namespace": row.namespace,
        "name": row.name,
        "uid": row.uid,
        "state": str(row.state),
        "reason": _text(row.reason),
        "worker": row.worker,
        "placements": list(row.placements)[-32:],
        "queue": row.queue,
        "created": row.created,
        "completions": row.completions,
        "estimatedStart": start,
        "estimateBasis": basis,
    }


def running_by_worker(rows: Iterable[Row]) -> dict[str, int]:
    """How many workloads run on each worker, from their rows."""
    running: dict[str, int] = {}
    for row in rows:
        if row["state"] == State.RUNNING and row["worker"]:
            running[row["worker"]] = running.get(row["worker"], 0) + 1
    return running


def event_row(side: str, event: Mapping[str, Any]) -> Row:
    """An Event about a workload (``side``: "manager", or the worker it happened on) as
    the panel shows it: what happened to which object, never an address."""
    involved = event.get("involvedObject") or {}
    series = event.get("series") or {}
    return {
        "side": side,
        "type": str(event.get("type") or "Normal")[:16],
        "reason": str(event.get("reason") or "")[:128],
        "message": _text(event.get("message")),
        "object": f"{involved.get('kind') or '?'}/{involved.get('name') or '?'}"[:300],
        "count": _count(event.get("count")) or _count(series.get("count")) or 1,
        "lastTimestamp": str(
            event.get("lastTimestamp")
            or series.get("lastObservedTime")
            or event.get("eventTime")
            or event.get("firstTimestamp")
            or Meta(event).creation_timestamp
        )[:40],
    }


# -- lists and watches ---------------------------------------------------------------


def list_body(view: str, rows: Iterable[Row]) -> dict[str, Any]:
    """A view's list answer."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": _LIST_KINDS.get(view, "EventView"),
        "metadata": {},
        "items": list(rows),
    }


@dataclass(frozen=True, slots=True)
class WatchChange:
    """One watch event: its type, the row's id (a viewer's access is decided by it),
    and its line as sent."""

    type: Literal["ADDED", "MODIFIED", "DELETED"]
    id: str
    line: bytes


def watch_line(type_: str, row: Mapping[str, Any]) -> bytes:
    """One watch event as sent: a JSON object and a newline."""
    return json.dumps({"type": type_, "object": row}, separators=(",", ":")).encode() + b"\n"


BOOKMARK = watch_line("BOOKMARK", {})


def changes(before: Mapping[str, Row], after: Mapping[str, Row]) -> Iterator[WatchChange]:
    """The watch events that turn ``before`` into ``after`` (rows by id): ADDED,
    MODIFIED for a row that differs, DELETED; unchanged rows send nothing."""
    for row_id, row in after.items():
        old = before.get(row_id)
        if old is row:  # the same row object: nothing changed (the common case)
            continue
        if old is None:
            yield WatchChange("ADDED", row_id, watch_line("ADDED", row))
        elif old != row:
            yield WatchChange("MODIFIED", row_id, watch_line("MODIFIED", row))
    for row_id, row in before.items():
        if row_id not in after:
            yield WatchChange("DELETED", row_id, watch_line("DELETED", row))
