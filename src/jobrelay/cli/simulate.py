"""`jobrelay simulate -f FILE`: where and when workloads would run, were they submitted
now, with no write to any cluster.

It reads the manager alone (RelayQueues, Namespaces, ResourceQuotas, PriorityClasses,
WorkerClusters and their capacity figures, the workloads already there) and judges each
workload of FILE by admission's and placement's rules (:mod:`jobrelay.admission.
dry_run_rules`), then estimates its start (:mod:`jobrelay.admission.start_estimate`).
What it reads and says is in simulate_input (pure); this only lists. Exit 0: every
workload can run, now or later; 1: one never can; 2: bad input.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobrelay.admission.dry_run_rules import judge_dry_run
from jobrelay.admission.namespace_quota import NamespaceLimits, read_hard
from jobrelay.admission.queue_places import QueueKnowledge, is_pending, queue_of
from jobrelay.admission.workload_reads import Priorities, read_for_admission
from jobrelay.cli.common import kubeconfig_namespace, manager_client, manager_options, run_command
from jobrelay.cli.controller_namespace import namespace_default_help
from jobrelay.cli.output_rules import dump
from jobrelay.cli.queue_positions import read_counted, read_known
from jobrelay.cli.simulate_input import (
    BadManifest,
    SimulatedWorkload,
    check_shape,
    kind_for,
    read_manifests,
    verdict_document,
    verdict_lines,
)
from jobrelay.cli.terminal import safe_lines
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.placement.workload import Invalid, read_choice, read_workload
from jobrelay.readmodel.estimate_reads import estimated_starts, summed_clusters, worker_figures
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, QUEUE_LABEL
from jobrelay.vocabulary.placement import placement_of

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

__all__ = ["simulate"]

EXIT_NEVER_RUNS = 1


def _read_input(filename: str) -> tuple[str, str]:
    if filename == "-":
        return sys.stdin.read(), "stdin"
    try:
        return Path(filename).read_text(encoding="utf-8"), filename
    except (OSError, UnicodeDecodeError) as error:
        raise click.UsageError(f"{filename}: cannot be read ({error})") from None


async def _namespace(client: ApiClient, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """A namespace's labels and annotations ({} when it cannot be read, or does not exist)."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import NAMESPACES

    try:
        meta = Meta(await client.get(NAMESPACES, name))
    except ApiError:
        return {}, {}
    return dict(meta.labels), dict(meta.annotations)


async def _quota(client: ApiClient, namespace: str) -> NamespaceLimits | None:
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import RESOURCE_QUOTAS

    try:
        quotas = (await client.list(RESOURCE_QUOTAS, namespace=namespace)).items
    except ApiError:
        return None  # not readable: the controller still holds to it
    hards = [(q.get("spec") or {}).get("hard") or {} for q in quotas]
    return read_hard(*hards) if hards else None


async def _worker_clusters(client: ApiClient) -> list[dict[str, Any]] | None:
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import WORKER_CLUSTERS

    try:
        return (await client.list(WORKER_CLUSTERS)).items
    except ApiError:
        return None


def _usage(
    counted: Sequence[tuple[WorkloadKind, Mapping[str, Any]]], known: QueueKnowledge
) -> tuple[dict[str, dict[str, int]], dict[str, list[Any]]]:
    """What the admitted workloads take of each queue, and their entries by namespace."""
    by_queue: dict[str, dict[str, int]] = {}
    by_namespace: dict[str, list[Any]] = {}
    for kind, obj in counted:
        body = dict(obj)
        if not placement_of(obj) or is_pending(kind, obj) or kind.is_finished(body):
            continue
        meta = Meta(obj)
        read = read_for_admission(WorkloadKey(kind.name, f"{meta.namespace}/{meta.name}"), kind,
                                  body, known.priorities)  # fmt: skip
        if read.entry is None:
            continue
        by_namespace.setdefault(meta.namespace, []).append(read.entry)
        queue = queue_of(obj, known)
        if queue:
            used = by_queue.setdefault(queue, {})
            for resource, quantity in read.entry.requests.items():
                used[resource] = used.get(resource, 0) + quantity
    return by_queue, by_namespace


async def judge_all(
    client: ApiClient,
    objects: list[dict[str, Any]],
    source: str,
    default_namespace: str,
    controller_name: str,
    controller_namespace: str | None,
) -> list[SimulatedWorkload]:
    """Each workload of ``objects`` judged against what the manager holds now."""
    from jobrelay.cli.get_kinds import known_kinds, workload_kinds
    from jobrelay.vocabulary.leases import lease_name_for

    kinds = workload_kinds(
        await known_kinds(client, controller_namespace, lease_name_for(controller_name))
    )
    typed: list[tuple[WorkloadKind, dict[str, Any]]] = []
    for obj in objects:
        kind = kind_for(obj, kinds, source)
        metadata = {**obj["metadata"]}
        metadata.setdefault("namespace", default_namespace)
        metadata.pop("creationTimestamp", None)  # submitted now: behind those waiting
        for mark in ("jobrelay.dev/cluster", "jobrelay.dev/placements"):
            (metadata.get("annotations") or {}).pop(mark, None)
        body = {**obj, "metadata": metadata}
        workload = read_workload(kind, body)
        if isinstance(workload, Invalid):
            raise BadManifest(f"{source}: {kind.ref.kind} {metadata['name']}: {workload}")
        typed.append((kind, body))
    known = await read_known(client)
    namespaces = sorted({str(obj["metadata"]["namespace"]) for _, obj in typed})
    counted = await read_counted(client, [k for k, _ in typed], namespaces,
                                 controller_name=controller_name)  # fmt: skip
    if known.namespace_labels is None:  # not listable: each namespace read on its own
        known = QueueKnowledge(known.queues, {}, known.priorities)
    labels: dict[str, Mapping[str, str]] = dict(known.namespace_labels or {})
    policies, quotas = {}, {}
    for namespace in namespaces:
        its_labels, annotations = await _namespace(client, namespace)
        labels.setdefault(namespace, its_labels)
        choice = read_choice(annotations)
        policies[namespace] = None if isinstance(choice, Invalid) else choice
        quotas[namespace] = await _quota(client, namespace)
    known = QueueKnowledge(known.queues, labels, known.priorities or Priorities())
    registrations = await _worker_clusters(client)
    clusters = summed_clusters(registrations or [])
    workers = None if registrations is None else worker_figures(registrations)
    now = datetime.now(UTC)
    estimates = estimated_starts(counted, known, workers, now, extra=typed)
    by_queue, by_namespace = _usage(counted, known)
    judged = []
    for kind, obj in typed:
        meta = Meta(obj)
        key = WorkloadKey(kind.name, f"{meta.namespace}/{meta.name}")
        read = read_for_admission(key, kind, obj, known.priorities)
        assert read.entry is not None and read.workload is not None  # read above
        verdict = judge_dry_run(
            read.entry, read.workload, named=meta.label(QUEUE_LABEL) or None,
            namespace_labels=labels.get(meta.namespace, {}), specs=known.queues or {},
            queue_usage=by_queue, quota=quotas.get(meta.namespace),
            namespace_admitted=by_namespace.get(meta.namespace, []), clusters=clusters,
            policy=policies.get(meta.namespace),
        )  # fmt: skip
        estimate = None if verdict.never else estimates.get(read.entry.key)
        judged.append(SimulatedWorkload(kind, meta.namespace, meta.name, verdict, estimate))
    return judged


@click.command()
@click.option("-f", "--filename", required=True, metavar="FILE",
              help="The workloads: YAML or JSON, one or more documents or a List; - for stdin.")  # fmt: skip
@click.option("-n", "--namespace", default=None,
              help="The namespace of workloads that name none [default: the kubeconfig "
                   "context's, else default].")  # fmt: skip
@click.option("-o", "--output", type=click.Choice(["json", "yaml"]), default=None,
              help="json|yaml: the verdicts as a List.")  # fmt: skip
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              help="The controller's spec.managedBy: whose workloads count as ahead.")  # fmt: skip
@click.option("--controller-namespace", default=None,
              help="The controller's namespace: its Lease says which kinds it runs "
                   f"[default: {namespace_default_help()}].")  # fmt: skip
@manager_options
def simulate(
    filename: str,
    namespace: str | None,
    output: str | None,
    controller_name: str,
    controller_namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """Where and when workloads would run, were they submitted now: the queue each would
    join, whether it would be admitted now, the worker it would go to or why each worker
    refuses, and its estimated start. Nothing is written to any cluster.

    Exit 0 when every workload can run, now or later; 1 when one never can (NeverFits,
    ExceedsNamespaceQuota, ExceedsQueueQuota, QueueNotAllowed, QueueNotFound); 2 on bad
    input."""
    text, source = _read_input(filename)
    try:
        objects = read_manifests(text, source)
        for obj in objects:
            check_shape(obj, source)
    except BadManifest as error:
        raise click.UsageError(str(error)) from None
    where = namespace or kubeconfig_namespace(kubeconfig, context)

    async def go() -> list[SimulatedWorkload]:
        async with manager_client(kubeconfig, context) as client:
            try:
                return await judge_all(client, objects, source, where, controller_name,
                                       controller_namespace)  # fmt: skip
            except BadManifest as error:
                raise click.UsageError(str(error)) from None

    judged = run_command(go())
    now = datetime.now(UTC)
    if output is not None:
        items = [verdict_document(one) for one in judged]
        click.echo(dump({"kind": "List", "items": items}, output))
    else:
        for index, one in enumerate(judged):
            if index:
                click.echo("")
            for line in safe_lines(verdict_lines(one, now)):
                click.echo(line)
    if any(one.verdict.never for one in judged):
        raise click.exceptions.Exit(EXIT_NEVER_RUNS)
