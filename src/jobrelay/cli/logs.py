"""`jobrelay logs`: a workload's pod logs from its worker, through the manager's apiserver
(the controller's aggregated API, api.jobrelay.dev).

The workload is named as kubectl names one: ``NAME`` (a Job), ``TYPE/NAME``
(``job/hello``, ``rayjob/train``, ``pytorchjobs/train``), or ``NAME`` with ``--kind``;
or selected, ``[TYPE] -l SELECTOR`` (the manager's workloads those labels select).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobrelay.cli.common import kubeconfig_namespace, manager_options
from jobrelay.kinds.catalog import DEFAULT_KIND
from jobrelay.relayapi.finished_logs_rules import PODS_REMOVED
from jobrelay.relayapi.log_refusal_rules import PodRefusal, RefusalFilter
from jobrelay.relayapi.route_rules import LOG, RelayError, job_path, log_params
from jobrelay.relayapi.stream_rules import LineSplitter

if TYPE_CHECKING:
    from jobrelay.relayapi.user_client import RelayClient

# Exit codes scripts can rely on (besides 0, and click's 2 for a usage error).
EXIT_FAILED = 1  # anything else: the API unreachable, a worker not connected, its pods removed
EXIT_NOT_FOUND = 3  # no such workload, not placed yet, no pods yet
EXIT_UNAUTHORIZED = 4  # credentials missing or not valid on the manager (401)
EXIT_FORBIDDEN = 5  # no right to read pods/log there (403), or its worker refused the log

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int:
    """``30s``, ``5m``, ``1h30m`` or plain seconds, as whole seconds (at least 1)."""
    if text.isdigit():
        seconds = int(text)
    else:
        found = _DURATION.match(text)
        if not text or found is None:
            raise ValueError(f"{text!r} is not a duration (e.g. 30s, 5m, 1h)")
        hours, minutes, secs = (int(part or 0) for part in found.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if seconds < 1:
        raise ValueError(f"{text!r}: a duration of at least 1s")
    return seconds


def _since(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error


def workload_named(text: str, kind: str | None) -> tuple[str | None, str]:
    """The kind asked for (None: the default kind's) and the name, from ``KIND/NAME`` or
    ``NAME`` with ``--kind``; ValueError when they disagree or a part is empty."""
    asked, slash, name = text.rpartition("/")
    if not slash:
        return kind, text
    if not asked or not name or "/" in asked:
        raise ValueError(f"{text!r}: write NAME or KIND/NAME (e.g. rayjob/train)")
    if kind is not None and kind.lower() != asked.lower():
        raise ValueError(f"{text!r} names kind {asked!r}, --kind says {kind!r}")
    return asked, name


@dataclass(frozen=True)
class LogsTarget:
    """What `jobrelay logs` reads: one workload (``name``), or those ``selector`` selects."""

    kind: str | None  # as typed (None: the default kind, Job)
    name: str = ""
    selector: str | None = None


def logs_target(text: str | None, kind: str | None, selector: str | None) -> LogsTarget:
    """``[TYPE/]NAME``, or ``[TYPE] -l SELECTOR``, as kubectl takes them; ValueError when
    both or neither name the workloads."""
    if selector is not None:
        if text and "/" in text:
            raise ValueError("name a workload (TYPE/NAME) or select them (-l), not both")
        if kind is not None and text and kind.lower() != text.lower():
            raise ValueError(f"TYPE {text!r} and --kind {kind!r} disagree")
        return LogsTarget(text or kind, selector=selector)
    if not text:
        raise ValueError("name a workload: [TYPE/]NAME, or select them with -l SELECTOR")
    asked, name = workload_named(text, kind)
    return LogsTarget(asked, name)


def explain(error: RelayError, namespace: str, name: str) -> tuple[str, int]:
    """What to tell the user about a refusal, and the exit code."""
    # The API itself missing (not registered) or down (not available): before the 404s
    # and 503s of a workload, whose codes these share.
    if error.reason in ("NoAPI", "APIUnavailable"):
        return f"error: {error.message}", EXIT_FAILED
    if error.code == 401:
        return (
            f"error: your credentials were not accepted ({error.message}); check your "
            "kubeconfig for the management cluster",
            EXIT_UNAUTHORIZED,
        )
    if error.code == 403:
        return (
            f"error: forbidden: {error.message}. Ask for a Role that allows get on pods/log "
            f"in namespace {namespace} (and on jobs/log in API group api.jobrelay.dev, which "
            "the chart adds to the built-in view role)",
            EXIT_FORBIDDEN,
        )
    if error.reason == PODS_REMOVED:
        # Finished, its pods gone with its mirror: said as the API says it (when, and the
        # setting that keeps them longer), never as a workload waiting for a worker.
        return error.message, EXIT_FAILED
    if error.code == 404:
        hints = {
            "NotPlaced": " (it waits for a worker: see `kubectl describe job`)",
            "NoPods": " (its pods are not created yet; try again, or -f)",
        }
        return f"error: {error.message}{hints.get(error.reason, '')}", EXIT_NOT_FOUND
    if error.code == 0:
        return f"error: {error.message}", EXIT_FAILED
    return f"error: {error.reason}: {error.message}", EXIT_FAILED


def explain_refusals(refusals: Sequence[PodRefusal], namespace: str) -> tuple[str, int]:
    """What to tell the user of the pods whose logs their worker refused mid-answer, and
    the exit code: a refusal of the worker's credential (403) is the controller's
    worker role lacking pods/log there, not the user's right on the manager."""
    lines = []
    for refusal in refusals:
        if refusal.forbidden:
            lines.append(
                f"error: the worker refused to read the log of pod {refusal.pod} (Forbidden): "
                f"the identity jobrelay holds on that worker may not get pods/log in "
                f"namespace {namespace}; its admin can grant it (docs/add-a-worker.md)"
            )
        else:
            lines.append(f"error: the log of pod {refusal.pod} could not be read: {refusal.why}")
    forbidden = any(refusal.forbidden for refusal in refusals)
    return "\n".join(lines), EXIT_FORBIDDEN if forbidden else EXIT_FAILED


@click.command()
@manager_options
@click.argument("workload", metavar="[TYPE/]NAME | [TYPE] -l SELECTOR", required=False)
@click.option(
    "-n", "--namespace", default=None, help="The workload's namespace [default: the context's]."
)
@click.option("-l", "--selector", default=None,
              help="The logs of every workload of TYPE (default jobs) these labels select, "
                   "instead of one NAME (kubectl -l syntax).")  # fmt: skip
@click.option("-f", "--follow", is_flag=True, help="Follow the log until the pod ends.")
@click.option("-c", "--container", default=None, help="The container [default: the only one].")
@click.option("--all-containers", is_flag=True,
              help="Every container's log of each pod (init containers first).")  # fmt: skip
@click.option("--prefix", is_flag=True,
              help="Each line after its source, [pod/NAME/CONTAINER] (as kubectl --prefix).")  # fmt: skip
@click.option("--index", type=click.IntRange(0), default=None,
              help="The pod of this completion index (Indexed Jobs) [default: the newest pod].")  # fmt: skip
@click.option("--all-pods", is_flag=True, help="Every pod's log, each line prefixed with its pod.")
@click.option("-p", "--previous", is_flag=True, help="The previous (restarted) container's log.")
@click.option("--tail", type=click.IntRange(-1), default=-1, show_default=True,
              help="Lines from the end to show; -1: all.")  # fmt: skip
@click.option("--since", default=None, callback=_since, metavar="DURATION",
              help="Only lines newer than this (e.g. 30s, 5m, 1h).")  # fmt: skip
@click.option("--timestamps", is_flag=True, help="Prefix each line with its time.")
@click.option("--kind", default=None,
              help=f"The workload's kind, or its plural (as jobrelay run --kind names it; "
                   f"or write TYPE/NAME) [default: {DEFAULT_KIND.ref.kind}].")  # fmt: skip
def logs(
    kubeconfig: Path | None,
    context: str | None,
    workload: str | None,
    namespace: str | None,
    selector: str | None,
    follow: bool,
    container: str | None,
    all_containers: bool,
    prefix: bool,
    index: int | None,
    all_pods: bool,
    previous: bool,
    tail: int,
    since: int | None,
    timestamps: bool,
    kind: str | None,
) -> None:
    """Print the logs of a workload's pods, read from its worker through the jobrelay
    controller.

    The workload is NAME (a Job), or TYPE/NAME: job/NAME, rayjob/NAME, pytorchjob/NAME,
    ...; or, with -l, every workload of TYPE (jobs when none) the selector matches,
    one after another (at once with -f).

    Goes through the management cluster's apiserver with your own kubeconfig, as
    kubectl does: needs only the right to get pods/log in the namespace there.
    """
    if index is not None and all_pods:
        raise click.UsageError("--index and --all-pods exclude each other")
    if previous and follow:
        raise click.UsageError("--previous and --follow exclude each other")
    if all_containers and container:
        raise click.UsageError("--all-containers and --container exclude each other")
    try:
        target = logs_target(workload, kind, selector)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    # The client (httpx2, lightkube) is imported only when a log is read, not for --help.
    from jobrelay.relayapi.user_client import connect

    namespace = namespace or kubeconfig_namespace(kubeconfig, context)
    params = log_params(
        {
            "container": container, "index": index, "all_containers": all_containers,
            "prefix": prefix, "all_pods": all_pods, "previous": previous,
            "tail": None if tail < 0 else tail, "since": since, "timestamps": timestamps,
            "follow": follow,
        }
    )  # fmt: skip
    refusals = RefusalFilter()
    failures: list[tuple[str, int]] = []

    async def go() -> None:
        named = [(target.kind, target.name)] if target.name else await selected(target)
        if not named:
            click.echo(f"No resources found in {namespace} namespace.", err=True)
            return
        async with connect(kubeconfig, context) as client:
            reads = [read(client, asked, name, whole_lines=len(named) > 1) for asked, name in named]
            if follow:  # each workload's log as it comes, line by line
                await asyncio.gather(*reads)
            else:
                for one in reads:
                    await one

    async def selected(target: LogsTarget) -> list[tuple[str | None, str]]:
        from jobrelay.cli.common import manager_client
        from jobrelay.cli.get_kinds import resolve
        from jobrelay.cli.types_rules import requests_of
        from jobrelay.vocabulary.leases import lease_name_for
        from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

        async with manager_client(kubeconfig, context) as manager:
            lease = lease_name_for(DEFAULT_CONTROLLER_NAME)
            found: list[tuple[str | None, str]] = []
            for _, kinds in await resolve(
                manager, requests_of([target.kind or "jobs"]), None, lease
            ):
                for one_kind in kinds:
                    listed = await manager.list(
                        one_kind.ref, namespace=namespace, label_selector=target.selector
                    )
                    names = sorted(str(obj["metadata"]["name"]) for obj in listed.items)
                    found += [(one_kind.ref.kind, name) for name in names]
            return found

    async def read(client: RelayClient, asked: str | None, name: str, *, whole_lines: bool) -> None:
        try:
            plural = DEFAULT_KIND.ref.plural if asked is None else await client.plural(asked)
            async with client.stream(job_path(namespace, plural, name, LOG), params) as chunks:
                await _copy(chunks, LineSplitter(b"") if whole_lines else None)
        except RelayError as error:
            if not whole_lines:
                raise
            failures.append(explain(error, namespace, name))

    async def _copy(chunks: AsyncIterator[bytes], lines: LineSplitter | None) -> None:
        out = sys.stdout.buffer
        async for chunk in chunks:
            printed = refusals.feed(chunk)
            if lines is not None:  # several logs at once: never half a line of each
                printed = lines.feed(printed)
            if printed:
                out.write(printed)
                out.flush()
        rest = refusals.flush()
        out.write(rest if lines is None else lines.feed(rest) + lines.flush())
        out.flush()

    try:
        asyncio.run(go())
    except RelayError as error:
        message, code = explain(error, namespace, target.name)
        click.echo(message, err=True)
        raise click.exceptions.Exit(code) from None
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None
    for message, _ in failures:
        click.echo(message, err=True)
    if refusals.refusals:
        # The other pods' logs are printed; the refused ones are errors, not output.
        message, code = explain_refusals(refusals.refusals, namespace)
        click.echo(message, err=True)
        failures.append((message, code))
    if failures:
        raise click.exceptions.Exit(failures[0][1])
