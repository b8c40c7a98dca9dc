"""`jobrelay describe job|jobset NAME`: one workload from both sides.

From the manager: its state and why it waits, its placement history, status
and conditions, and its Events (those the controller relays from the worker
included). From the worker, through the controller's API (the user's manager
credentials only): the mirror's conditions and its pods. What is printed is
:func:`render` (pure); the rest fetches.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from jobrelay.admission.queue_places import is_pending
from jobrelay.admission.start_estimate import StartEstimate
from jobrelay.cli import workloads
from jobrelay.cli.common import (
    NotFound,
    kubeconfig_namespace,
    manager_client,
    manager_options,
    run_command,
)
from jobrelay.cli.get import complete_names, complete_types
from jobrelay.cli.get_kinds import JOB_KIND, JOBSET_KIND, resolve
from jobrelay.cli.queue_positions import read_estimates, read_served
from jobrelay.cli.terminal import safe_lines
from jobrelay.cli.types_rules import ArgumentsError, TypeRequest, requests_of
from jobrelay.cli.workloads import State, human_duration, parse_time, table
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import EVENTS
from jobrelay.readmodel.estimate_reads import estimate_line
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME
from jobrelay.vocabulary.placement import placement_of, placements_of

# (namespace, name, kind) -> {cluster, mirror, pods: [{name, phase, node, restarts, ready,
# lastState, conditions}]}, or an awaitable of it: the controller API's view of the
# worker side (jobrelay.relayapi.user_client.fetch_mirror). Anything it raises is shown as why
# the worker side is unavailable.
MirrorFetcher = Callable[[str, str, str], Any]


class WorkerDetailsUnavailable(Exception):
    """Why the worker side of a workload cannot be shown (the rest still is)."""


def relay_api_fetcher(kubeconfig: Path | None, context: str | None) -> MirrorFetcher:
    """The controller API client's ``fetch_mirror``, given the manager's kubeconfig and
    context where it takes them. Imported only when needed: describe works without it."""
    try:
        module = importlib.import_module("jobrelay.relayapi.user_client")
        fetch = module.fetch_mirror
    except (ImportError, AttributeError) as error:
        raise WorkerDetailsUnavailable(
            "this jobrelay has no client of the controller's API (jobrelay.relayapi.user_client)"
        ) from error
    try:
        accepted = set(inspect.signature(fetch).parameters)
    except (TypeError, ValueError):
        accepted = set()
    extra = {
        key: value
        for key, value in (("kubeconfig", kubeconfig), ("context", context))
        if key in accepted
    }
    fetcher: MirrorFetcher = functools.partial(fetch, **extra) if extra else fetch
    return fetcher


# How describe reaches the worker side; unit tests swap it.
fetcher_factory: Callable[[Path | None, str | None], MirrorFetcher] = relay_api_fetcher


@dataclass(frozen=True)
class WorkerSide:
    """What the controller's API said of the mirror, or why it could not say."""

    details: Mapping[str, Any] | None = None
    unavailable: str = ""


def fetch_worker_side(fetcher: Callable[[], MirrorFetcher], namespace: str, name: str,
                      kind: WorkloadKind) -> WorkerSide:  # fmt: skip
    """Call the fetcher (sync or async), turning every failure into a reason."""
    try:
        answer = fetcher()(namespace, name, kind.ref.kind)
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
    except Exception as error:
        why = getattr(error, "message", None) or str(error) or type(error).__name__
        return WorkerSide(unavailable=str(why))
    if not isinstance(answer, Mapping):
        return WorkerSide(unavailable="the controller's API answered something else than an object")
    return WorkerSide(details=answer)


async def _awaited(answer: Any) -> Any:
    return await answer


def _waits(state: State, reason: str, obj: Mapping[str, Any]) -> str:
    """Why it waits, in a sentence, or ``""`` when it does not."""
    if state is State.HELD:
        return f"not placed: {reason}"
    if state is State.PENDING:
        return (
            "not placed yet: the controller has not looked at it (is `jobrelay run` running, "
            "with this kind and controller name?)"
        )
    if state is State.BLOCKED:
        return f"the worker cannot create its pods: {reason}"
    if state is State.SUSPENDED:
        placed = placement_of(obj)
        return "suspended (spec.suspend): " + (
            f"its mirror on {placed} is suspended too" if placed else "it is placed once resumed"
        )
    if state is State.DISPATCHED:
        return "placed; the worker has not started its pods yet"
    return ""


def _conditions(conditions: Any, now: datetime, indent: str) -> list[str]:
    rows = [
        (
            str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""),
            _ago(c.get("lastTransitionTime"), now), str(c.get("message") or ""),
        )
        for c in conditions or []
        if isinstance(c, Mapping)
    ]  # fmt: skip
    if not rows:
        return [f"{indent}<none>"]
    lines = table(rows, ("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"))
    return [f"{indent}{line}" for line in lines]


def _ago(when: Any, now: datetime) -> str:
    moment = parse_time(when)
    return "<unknown>" if moment is None else human_duration((now - moment).total_seconds())


def _status_lines(kind: WorkloadKind, obj: Mapping[str, Any]) -> list[str]:
    status = obj.get("status") or {}
    if kind is JOB_KIND:
        counts = (
            f"{status.get('active', 0)} Active ({status.get('ready', 0)} Ready) / "
            f"{status.get('succeeded', 0)} Succeeded / {status.get('failed', 0)} Failed"
        )
        lines = [f"Pods Statuses:    {counts}"]
        for label, key in (("Start Time", "startTime"), ("Completed At", "completionTime")):
            if status.get(key):
                lines.append(f"{label + ':':<18}{status[key]}")
        return lines
    if kind is JOBSET_KIND:
        lines = ["Replicated Jobs:"]
        for entry in status.get("replicatedJobsStatus") or []:
            lines.append(
                f"  {entry.get('name')}: {entry.get('active', 0)} active, "
                f"{entry.get('ready', 0)} ready, {entry.get('succeeded', 0)} succeeded, "
                f"{entry.get('failed', 0)} failed"
            )
        return lines if len(lines) > 1 else ["Replicated Jobs:  <none yet>"]
    return []


def _last_state(value: Any) -> str:
    """A pod's last container state: ``terminated: OOMKilled (exit 137)``, or as given."""
    if isinstance(value, Mapping):
        for state, detail in value.items():
            if isinstance(detail, Mapping):
                reason = detail.get("reason") or ""
                code = detail.get("exitCode")
                exit_text = f" (exit {code})" if code is not None else ""
                return f"{state}: {reason}{exit_text}".strip().rstrip(":")
            return str(state)
        return "-"
    return str(value) if value not in (None, "") else "-"


def _worker_lines(side: WorkerSide, now: datetime) -> list[str]:
    if side.details is None:
        return [f"worker details unavailable: {side.unavailable}"]
    details = side.details
    mirror = details.get("mirror") or {}
    meta = Meta(mirror)
    lines = [f"Worker:           {details.get('cluster') or '-'}"]
    lines.append(f"Mirror:           {meta.namespace}/{meta.name}")
    lines.append("  Conditions:")
    lines.extend(_conditions((mirror.get("status") or {}).get("conditions"), now, "    "))
    pods = [p for p in details.get("pods") or [] if isinstance(p, Mapping)]
    lines.append("Pods:" if pods else "Pods:             <none>")
    if pods:
        rows = [
            (
                str(p.get("name", "")), str(p.get("phase") or "-"), _ready(p.get("ready")),
                str(p.get("node") or "-"), str(p.get("restarts", 0)), _last_state(p.get("lastState")),
            )
            for p in pods
        ]  # fmt: skip
        lines.extend(
            f"  {line}"
            for line in table(rows, ("NAME", "PHASE", "READY", "NODE", "RESTARTS", "LAST STATE"))
        )
        for pod in pods:
            waiting = [
                c for c in pod.get("conditions") or []
                if isinstance(c, Mapping) and c.get("status") != "True" and c.get("message")
            ]  # fmt: skip
            lines.extend(
                f"  {pod.get('name')}: {c.get('type')}: {c.get('reason') or ''} {c.get('message')}"
                for c in waiting
            )
    return lines


def _ready(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return "-" if value is None else str(value)


def _event_lines(events: Sequence[Mapping[str, Any]], now: datetime) -> list[str]:
    if not events:
        return ["Events:           <none>"]

    def when(event: Mapping[str, Any]) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or "")

    rows = []
    for event in sorted(events, key=when):
        last = _ago(when(event), now)
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        first = event.get("firstTimestamp") or event.get("eventTime")
        age = f"{last} (x{count} over {_ago(first, now)})" if count > 1 else last
        source = event.get("source") or {}
        reporter = source.get("component") or event.get("reportingController") or ""
        rows.append(
            (str(event.get("type", "")), str(event.get("reason", "")), age, str(reporter),
             str(event.get("message", "")))
        )  # fmt: skip
    return ["Events:"] + [
        f"  {line}" for line in table(rows, ("TYPE", "REASON", "AGE", "FROM", "MESSAGE"))
    ]


def render(
    kind: WorkloadKind,
    obj: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    worker: WorkerSide | None,
    now: datetime,
    *,
    estimate: StartEstimate | None = None,
    place: tuple[str, int | None] | None = None,
) -> list[str]:
    """The whole description; ``worker`` is None when it was never placed; ``estimate``:
    when it is likely to start, while it waits; ``place``: its queue and position there,
    as the controller's API says them (None: not said)."""
    meta = Meta(obj)
    where = workloads.standing(kind, obj)
    history = placements_of(obj)
    lines = [
        f"Name:             {meta.name}",
        f"Namespace:        {meta.namespace}",
        f"Kind:             {kind.ref.kind} ({kind.ref.api_version})",
        f"Managed By:       {kind.managed_by(dict(obj)) or '-'}",
        f"Created:          {meta.creation_timestamp or '-'} ({workloads.age(obj, now)} ago)",
        f"State:            {where.state.value}",
    ]
    if where.reason:
        lines.append(f"Reason:           {where.reason}")
    waits = _waits(where.state, where.reason, obj)
    if waits:
        lines.append(f"Waiting:          {waits}")
    if place is not None:
        queue, position = place
        lines.append(f"Queue:            {queue}" + (f" (position {position})" if position else ""))
    if estimate is not None:
        lines.append(f"{'Waiting:' if not waits else '':18}estimated start: "
                     f"{estimate_line(estimate, now)}")  # fmt: skip
    lines.append(f"Cluster:          {placement_of(obj) or '-'}")
    if history:
        current = len(history)
        lines.append("Placements:")
        lines.extend(
            f"  {run}. {name}" + (" (current)" if run == current else "")
            for run, name in enumerate(history, start=1)
        )
    else:
        lines.append("Placements:       <none>")
    lines.append(f"Completions:      {workloads.completions({'kind': kind.ref.kind, **obj})}")
    lines.append(f"Duration:         {workloads.duration(obj, now)}")
    lines.extend(_status_lines(kind, obj))
    lines.append("Conditions:")
    lines.extend(_conditions((obj.get("status") or {}).get("conditions"), now, "  "))
    if worker is not None:
        lines.extend(_worker_lines(worker, now))
    lines.extend(_event_lines(events, now))
    return lines


async def manager_side(
    client: ApiClient, kind: WorkloadKind, namespace: str, name: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    resource = kind.ref
    try:
        obj = await client.get(resource, name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            raise NotFound(
                f'{kind.ref.plural}.{kind.ref.group} "{name}" not found in namespace {namespace}'
            ) from None
        raise
    obj.setdefault("apiVersion", resource.api_version)
    obj.setdefault("kind", resource.kind)
    uid = Meta(obj).uid
    listed = await client.list(
        EVENTS, namespace=namespace, field_selector=f"involvedObject.uid={uid}"
    )
    events = [e for e in listed.items if (e.get("involvedObject") or {}).get("uid") == uid]
    return obj, events


def complete_arguments(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """TYPE first, then the names of that type's workloads."""
    typed = ctx.params.get("arguments") or ()
    if not typed:
        return complete_types(ctx, param, incomplete)
    ctx.params["resource_type"] = typed[0]
    return complete_names(ctx, param, incomplete)


async def described(
    client: ApiClient, requests: list[TypeRequest], where: str, selector: str | None
) -> list[tuple[WorkloadKind, dict[str, Any], list[dict[str, Any]]]]:
    """Each named workload (NotFound, exit 3, for one missing), or each one -l selects."""
    from jobrelay.vocabulary.leases import lease_name_for

    found = []
    resolved = await resolve(client, requests, None, lease_name_for(DEFAULT_CONTROLLER_NAME))
    for request, kinds in resolved:
        for kind in kinds:
            names = list(request.names)
            if not names:
                listed = await client.list(kind.ref, namespace=where, label_selector=selector)
                names = [Meta(obj).name for obj in listed.items]
            for name in names:
                obj, events = await manager_side(client, kind, where, name)
                found.append((kind, obj, events))
    return found


@click.command()
@click.argument("arguments", nargs=-1, metavar="TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR",
                shell_complete=complete_arguments)  # fmt: skip
@click.option("-n", "--namespace", default=None,
              help="The namespace [default: the kubeconfig context's, else default].")  # fmt: skip
@click.option("-l", "--selector", default=None,
              help="Describe every workload of TYPE with these labels (kubectl -l syntax).")  # fmt: skip
@manager_options
def describe(
    arguments: tuple[str, ...],
    namespace: str | None,
    selector: str | None,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """Show one workload: state and why it waits, placement history, status and conditions,
    the mirror's conditions and pods on its worker, and its Events (the worker's
    relayed). Exit 3 when it does not exist.

    TYPE is job, jobset, any kind the controller runs or Kind.version.group, as `get`."""
    if not arguments:
        raise click.UsageError("describe TYPE NAME, TYPE/NAME or TYPE -l SELECTOR")
    try:
        requests = requests_of(arguments)
    except ArgumentsError as error:
        raise click.UsageError(str(error)) from None
    if not selector and not any(request.names for request in requests):
        raise click.UsageError(f"describe {arguments[0]} needs a NAME or -l SELECTOR")
    where = namespace or kubeconfig_namespace(kubeconfig, context)

    Found = list[tuple[WorkloadKind, dict[str, Any], list[dict[str, Any]]]]
    served: dict[str, tuple[str, int | None]] = {}

    async def go() -> tuple[Found, dict[str, StartEstimate]]:
        async with manager_client(kubeconfig, context) as client:
            found = await described(client, requests, where, selector)
            waiting = [(kind, obj) for kind, obj, _ in found if is_pending(kind, obj)]
            estimates = {}
            if waiting:
                estimates = await read_estimates(client, waiting, datetime.now(UTC),
                                                 controller_name=DEFAULT_CONTROLLER_NAME)  # fmt: skip
                # Its queue and position, when the controller's API tells them.
                places = await read_served(client, [where])
                served.update(places[0] if places is not None else {})
            return found, estimates

    found, estimates = run_command(go())
    if not found:
        click.echo(f"No resources found in {where} namespace.", err=True)
    for index, (kind, obj, events) in enumerate(found):
        worker = None
        name = Meta(obj).name
        if placement_of(obj):
            worker = fetch_worker_side(
                lambda: fetcher_factory(kubeconfig, context), where, name, kind
            )
        if index:
            click.echo("")
        meta = Meta(obj)
        key = f"{kind.ref.kind} {meta.namespace}/{meta.name}"
        lines = render(kind, obj, events, worker, datetime.now(UTC), estimate=estimates.get(key),
                       place=served.get(key))  # fmt: skip
        for line in safe_lines(lines):
            click.echo(line)
