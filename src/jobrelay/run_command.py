"""`jobrelay run` and `jobrelay install`: the composition root that builds and starts the
controller.

Above the CLI package (its flags and client options are the CLI's), so the CLI's verbs
import nothing of the controller; `cli/main.py` names this module as the verbs' home and
loads it only when one of them runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from jobrelay.cli.apiflags import api_options
from jobrelay.cli.common import (
    checked_field_flags,
    checked_kind_names,
    checked_origin,
    manager_client,
    manager_options,
    run_command,
)
from jobrelay.controller import runner
from jobrelay.controller.options import (
    DEFAULTS,
    ControllerOptions,
    KindSettings,
    LeaderElectionSettings,
)
from jobrelay.fleet import workerclusters
from jobrelay.fleet.cluster_profile_rules import (
    ClusterProfileSettings,
    ProviderFileError,
    parse_provider_file,
)
from jobrelay.kinds.managed_by_claims import parse_field_flag, parse_kind_flag
from jobrelay.kube import redact
from jobrelay.kube.election.election_rules import ElectionTiming
from jobrelay.kube.election.elector import LeadershipLost
from jobrelay.kube.errors import ApiError
from jobrelay.observe.logging import setup_logging
from jobrelay.placement.selectors import SelectorError, parse_selector
from jobrelay.relayapi.auto_register_rules import choose_api_serving
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.vocabulary.go_durations import go_duration_text, parse_go_duration
from jobrelay.web.probe_server import parse_address

_log = logging.getLogger(__name__)

# A Lease's name: an RFC 1123 subdomain.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's ``run`` where it is installed (pyproject's marker: not on Windows): the event
    loop and TLS in C, a third less CPU per request under load; else asyncio's own."""
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return asyncio.run
    run: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    return run


def _default(path: str) -> Any:
    """A setting's default, by its dotted name in ControllerOptions (``queue.retry_qps``):
    read from controller/options.py, the one place defaults are written."""
    value: Any = DEFAULTS
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _lease_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
        raise click.BadParameter(f"{value!r} is not a valid Lease name (lower-case DNS subdomain)")
    return value


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _namespace_list(value: str | None) -> tuple[str, ...] | None:
    """``a,b`` as ("a", "b"); "" as none; None (not given) as None."""
    if value is None:
        return None
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    for name in names:
        if not _DNS_LABEL.fullmatch(name):
            raise click.BadParameter(f"{name!r} is not a namespace name",
                                     param_hint="--dependency-secret-namespaces")  # fmt: skip
    return names


def _address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if value:
        try:
            parse_address(value)
        except ValueError as error:
            raise click.BadParameter(str(error)) from error
    return value


def _ttl(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    try:
        return parse_go_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error


def _profile_selector(value: str) -> str:
    try:
        parse_selector(value)
    except SelectorError as error:
        raise click.BadParameter(str(error), param_hint="--cluster-profile-selector") from None
    return value


def profile_settings(
    namespace: str | None, selector: str, provider_file: Path | None
) -> ClusterProfileSettings | None:
    """The ClusterProfile settings of the flags, the provider file read (once) and checked:
    one line saying what is wrong, else."""
    if namespace is None:
        if provider_file is not None or selector:
            raise click.UsageError(
                "--cluster-profile-selector and --cluster-profile-access-providers need "
                "--cluster-profiles NAMESPACE"
            )
        return None
    if not _DNS_LABEL.fullmatch(namespace):
        raise click.BadParameter(f"{namespace!r} is not a namespace name",
                                 param_hint="--cluster-profiles")  # fmt: skip
    if provider_file is None:
        raise click.UsageError(
            "--cluster-profiles needs --cluster-profile-access-providers FILE: a profile's "
            "credentials come from the exec plugins it names"
        )
    try:
        text = provider_file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise click.BadParameter(
            f"cannot read {provider_file}: {redact.library_problem(error)}",
            param_hint="--cluster-profile-access-providers",
        ) from None
    try:
        providers = parse_provider_file(text, str(provider_file))
    except ProviderFileError as error:
        raise click.BadParameter(
            str(error), param_hint="--cluster-profile-access-providers"
        ) from None
    return ClusterProfileSettings(namespace, selector, providers, str(provider_file))


def _api_served(api: ApiSettings, mode: str, manager_server: str) -> ApiSettings:
    """``api`` with the address it is served at and whether it is registered, as
    ``--api-register mode`` decides for this manager (relayapi/auto_register_rules.py)."""
    choice = choose_api_serving(mode, api.address, manager_server)
    if choice.address or mode != "auto":
        _log.info(
            "aggregated API: %s%s (%s)",
            f"served at {choice.address}" if choice.address else "not served",
            ", registered by the leader" if choice.register else ", not registered",
            choice.why, extra={"event": "api-choice"},
        )  # fmt: skip
    return dataclasses.replace(api, address=choice.address, register=choice.register)


@click.command()
@manager_options
@click.option("--controller-name", default=_default("controller_name"), show_default=True,
              help="The spec.managedBy value of the workloads to dispatch.")  # fmt: skip
@click.option("--origin", default=_default("origin"), callback=checked_origin,
              help="This management cluster's identity, the label jobrelay.dev/origin on every "
                   "mirror: managers sharing a worker only touch mirrors of their own origin "
                   "[default: the origin recorded in the ConfigMap <lease name>-origin of "
                   "--namespace, else the UID of the manager's kube-system namespace, then "
                   "recorded].")  # fmt: skip
@click.option("--kind", "kinds", multiple=True, callback=checked_kind_names, metavar="Kind.version.group[=VALUE]",
              help="A workload kind to dispatch (repeatable); default: "
                   f"{', '.join(_default('kinds.names'))}. =VALUE: the managedBy value its "
                   "workloads carry (default: --controller-name), e.g. "
                   "RayJob.v1.ray.io=kueue.x-k8s.io/multikueue. Job, JobSet, RayJob, RayCluster, "
                   "TrainJob, PyTorchJob and MPIJob have adapters of their own; any other CRD "
                   "with managedBy is mirrored as it stands.")  # fmt: skip
@click.option("--managed-by-field", "managed_by_fields", multiple=True, callback=checked_field_flags,
              metavar="Kind.version.group=FIELD",
              help="Where a kind without an adapter keeps managedBy (repeatable): "
                   "spec.managedBy (the default) or spec.runPolicy.managedBy.")  # fmt: skip
@click.option("--finished-condition", "finished_conditions", multiple=True, metavar="TYPE",
              help="A condition type that, once True, finishes a workload of a generic kind "
                   f"(repeatable); default: {', '.join(_default('kinds.finished_conditions'))}.")  # fmt: skip
@click.option("-n", "--namespace", default=_default("workers.namespace"), show_default=True,
              help="The controller's own namespace (its Lease, the worker kubeconfig Secrets), "
                   "as `helm -n` names the release's; not a workload's.")  # fmt: skip
@click.option("--finished-mirror-ttl", show_default=True,
              default=go_duration_text(_default("relay.finished_mirror_ttl")), metavar="DURATION",
              callback=_ttl,
              help="How long a finished workload's mirror and its pods (with their logs) stay "
                   "on its worker after it finished (e.g. 20s, 1h; 0 deletes it at once); "
                   "never longer than the workload's own ttlSecondsAfterFinished.")  # fmt: skip
@click.option(
    "--keep-finished-mirrors", is_flag=True,
    help="Leave finished mirrors on the workers for ever (beats --finished-mirror-ttl).",
)  # fmt: skip
@click.option("--dependency-secret-namespaces", metavar="NS[,NS...]", default=None,
              callback=lambda _ctx, _param, value: _namespace_list(value),
              help="Read Secrets (to copy them to workers) only in these namespaces, each "
                   "opened to Secret copying by an admin (a Role there); \"\" reads none. "
                   "Default: every namespace the credential may read.")  # fmt: skip
@click.option("--no-create-namespaces", is_flag=True,
              help="Do not create a workload's namespace on a worker that lacks it (report it instead).")  # fmt: skip
@click.option("--worker-sync-timeout", default=_default("workers.sync_timeout"), show_default=True,
              type=click.FloatRange(0.0), help="Seconds a worker may take to list its mirrors.")  # fmt: skip
@click.option("--worker-status-interval", default=_default("workers.status_interval"),
              show_default=True, type=click.FloatRange(1.0),
              help="Seconds between refreshes of each WorkerCluster's status.")  # fmt: skip
@click.option("--worker-health-timeout", default=_default("workers.health_timeout"),
              show_default=True, type=click.FloatRange(1.0),
              help="Seconds within which a failing or silent worker shows Connected=False "
                   "and takes no new workloads (it is probed every sixth of it).")  # fmt: skip
@click.option("--worker-lost-timeout", default=_default("workers.lost_timeout"),
              show_default=True, type=click.FloatRange(1.0),
              help="Seconds a worker may stay not connected before it is declared lost and its "
                   "unfinished workloads run elsewhere (counters carried over).")  # fmt: skip
@click.option("--status-batch-period", default=_default("relay.status_batch_period"),
              show_default=True, type=click.FloatRange(0.0),
              help="Seconds a passing status step (only ready/terminating counts changed, a "
                   "run's start, or a target condition before its final one) may wait to be copied together "
                   "with the next (0: copy every step at once).")  # fmt: skip
@click.option("--completed-events/--no-completed-events",
              default=_default("relay.completed_events"), show_default=True,
              help="A Normal Completed Event on each workload that succeeds (its finished "
                   "condition says the same; each costs a manager write).")  # fmt: skip
@click.option("--rejected-retry", default=_default("relay.rejected_retry"), show_default=True,
              type=click.FloatRange(0.1), help="Seconds before retrying a mirror a worker rejected.")  # fmt: skip
@click.option("--unplaceable-retry", default=_default("relay.unplaceable_retry"),
              show_default=True, type=click.FloatRange(0.1),
              help="Seconds before trying again to place a workload no worker can take (a change "
                   "of any worker's capacity tries at once).")  # fmt: skip
@click.option("--pending-timeout", default=_default("relay.pending_timeout"),
              show_default=True, type=click.FloatRange(0.0),
              help="Seconds a mirror's pods may stay unschedulable on its worker before it moves "
                   "to a cluster that fits (never once a pod started, unless the workload is "
                   "annotated jobrelay.dev/redispatch: always); 0 never moves it.")  # fmt: skip
@click.option("--max-moves", default=_default("relay.max_moves"), show_default=True,
              type=click.IntRange(0),
              help="Moves to another worker a workload may make after worker-side failures (its "
                   "image cannot be pulled there, its containers cannot be set up, its pods are "
                   "evicted); a workload's jobrelay.dev/max-moves annotation overrides it.")  # fmt: skip
@click.option("--failed-worker-avoid-for", default=_default("relay.failed_worker_avoid_for"),
              show_default=True, type=click.FloatRange(0.0),
              help="Seconds a workload avoids a worker it moved away from after a worker-side "
                   "failure there.")  # fmt: skip
@click.option("--provisioning-candidates", default=_default("relay.provisioning_candidates"),
              show_default=True, type=click.IntRange(0),
              help="Autoscaled workers asked at once (a ProvisioningRequest each) for capacity "
                   "a workload fits on no worker now but would on the nodes they can add; 0 "
                   "never asks.")  # fmt: skip
@click.option("--gc-interval", default=_default("gc_interval"), show_default=True,
              type=click.FloatRange(1.0),
              help="Seconds between passes over every mirror and every workload that may need work (orphan clean-up bound).")  # fmt: skip
@click.option("--concurrency", default=_default("concurrency"), show_default=True,
              type=click.IntRange(1, 256), help="Reconciles at once.")  # fmt: skip
@click.option("--retry-base-delay", default=_default("queue.retry_base_delay"), show_default=True,
              type=click.FloatRange(0.001), help="First per-key backoff of a retried key, in seconds (doubles each retry).")  # fmt: skip
@click.option("--retry-max-delay", default=_default("queue.retry_max_delay"), show_default=True,
              type=click.FloatRange(0.1), help="Longest per-key backoff between retries, in seconds.")  # fmt: skip
@click.option("--retry-qps", default=_default("queue.retry_qps"), show_default=True,
              type=click.FloatRange(0.1), help="Retries per second over all keys (a token bucket).")  # fmt: skip
@click.option("--retry-burst", default=_default("queue.retry_burst"), show_default=True,
              type=click.IntRange(1), help="Retries that may go at once above --retry-qps.")  # fmt: skip
@click.option("--leader-elect/--no-leader-elect", "leader_elect",
              default=_default("leader_election.enabled"), show_default=True,
              help="Run as one of several replicas: only the holder of the Lease acts, the others "
                   "keep warm caches and take over when it goes.")  # fmt: skip
@click.option("--leader-election-id", "lease_name", default=None, callback=_lease_name,
              help="Name of the Lease (in --namespace) [default: from --controller-name, "
                   "e.g. jobrelay-relay].")  # fmt: skip
@click.option("--leader-election-lease-duration", "lease_duration",
              default=_default("leader_election.lease_duration"), show_default=True,
              type=click.FloatRange(1.0),
              help="Seconds a standby waits, after the leader's last renewal, before taking over.")  # fmt: skip
@click.option("--leader-election-renew-deadline", "renew_deadline",
              default=_default("leader_election.renew_deadline"), show_default=True,
              type=click.FloatRange(0.1),
              help="Seconds the leader keeps acting without a successful renewal (then it exits); "
                   "less than the lease duration.")  # fmt: skip
@click.option("--leader-election-retry-period", "retry_period",
              default=_default("leader_election.retry_period"), show_default=True,
              type=click.FloatRange(0.01),
              help="Seconds between tries to acquire or renew the Lease.")  # fmt: skip
@click.option("--health-address", default=_default("health_address"),
              callback=_address, metavar="HOST:PORT",
              help="Serve /healthz and /readyz here (e.g. :8081; port 0 picks a free one, logged) "
                   "[default: none].")  # fmt: skip
@click.option("--metrics-address", default=_default("metrics_address"),
              show_default=True, callback=_address, metavar="HOST:PORT",
              help="Serve /metrics (Prometheus), /healthz and /readyz here (port 0 picks a free "
                   "one, logged; \"\" serves none).")  # fmt: skip
@click.option("--allow-exec-credentials", is_flag=True,
              default=_default("workers.allow_exec_credentials"),
              help="Accept worker kubeconfigs whose user runs an exec credential plugin (as "
                   "managed clouds' do). RISK: anyone who can write Secrets in --namespace can "
                   "then run commands in the controller, with its service account. tokenFile "
                   "and file paths stay refused.")  # fmt: skip
@click.option("--cluster-profiles", "cluster_profiles", metavar="NAMESPACE", default=None,
              help="Make every ClusterProfile (multicluster.x-k8s.io/v1alpha1) of this namespace "
                   "that --cluster-profile-selector matches a worker, named after it, its "
                   "credentials from --cluster-profile-access-providers [default: none].")  # fmt: skip
@click.option("--cluster-profile-selector", default="", metavar="SELECTOR",
              callback=lambda _ctx, _param, value: _profile_selector(value),
              help="Which ClusterProfiles of --cluster-profiles are workers (kubectl -l "
                   "syntax, e.g. env=prod,tier!=gpu) [default: all].")  # fmt: skip
@click.option("--cluster-profile-access-providers", "--clusterprofile-provider-file",
              "access_providers", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The access-provider file (KEP-5339: {\"providers\": [{name, execConfig}]}), "
                   "read once at start: a profile's access provider of a name it lists gives "
                   "the server and CA, the file the exec plugin; exec runs only for these "
                   "(needed with --cluster-profiles).")  # fmt: skip
@click.option("--install-crds", is_flag=True, default=_default("install_crds"),
              help="Apply jobrelay's CRDs at start (the local fleet, tests). Without it the "
                   "CRDs must be installed (the chart, or charts/jobrelay/files/crds/) and are "
                   "only checked for.")  # fmt: skip
@api_options
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--log-level", default="info", show_default=True, type=click.Choice(
    ["debug", "info", "warning", "error", "critical"], case_sensitive=False))  # fmt: skip
def run(
    kubeconfig: Path | None,
    context: str | None,
    controller_name: str,
    origin: str,
    kinds: tuple[str, ...],
    managed_by_fields: tuple[str, ...],
    finished_conditions: tuple[str, ...],
    namespace: str,
    finished_mirror_ttl: float,
    keep_finished_mirrors: bool,
    dependency_secret_namespaces: tuple[str, ...] | None,
    no_create_namespaces: bool,
    worker_sync_timeout: float,
    worker_status_interval: float,
    worker_health_timeout: float,
    worker_lost_timeout: float,
    status_batch_period: float,
    rejected_retry: float,
    completed_events: bool,
    unplaceable_retry: float,
    pending_timeout: float,
    max_moves: int,
    failed_worker_avoid_for: float,
    provisioning_candidates: int,
    gc_interval: float,
    concurrency: int,
    retry_base_delay: float,
    retry_max_delay: float,
    retry_qps: float,
    retry_burst: int,
    leader_elect: bool,
    lease_name: str | None,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    health_address: str,
    metrics_address: str,
    api: ApiSettings,
    api_register: str,
    allow_exec_credentials: bool,
    cluster_profiles: str | None,
    cluster_profile_selector: str,
    access_providers: Path | None,
    install_crds: bool,
    log_format: str,
    log_level: str,
) -> None:
    """Run the controller in the foreground until SIGTERM or SIGINT.

    Needs jobrelay's CRDs installed (the chart, or charts/jobrelay/files/crds/), or applies
    them with --install-crds. With leader election
    (the default) it acts only while holding the Lease; if it cannot renew it
    in time it stops acting and exits with code 1, to come back as a standby.
    """
    election = LeaderElectionSettings(
        enabled=leader_elect,
        lease_name=lease_name,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
    )
    problems = ElectionTiming(lease_duration, renew_deadline, retry_period).problems()
    if leader_elect and problems:
        raise click.UsageError("leader election: " + "; ".join(problems))
    setup_logging("json" if log_format == "json" else "text", log_level)
    manager = manager_client(kubeconfig, context)
    api = _api_served(api, api_register, manager.server)
    kind_settings = KindSettings()
    claims = [parse_kind_flag(text) for text in kinds]
    options = ControllerOptions(
        controller_name=controller_name,
        origin=origin,
        concurrency=concurrency,
        gc_interval=gc_interval,
        queue=dataclasses.replace(
            DEFAULTS.queue,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            retry_qps=retry_qps,
            retry_burst=retry_burst,
        ),
        workers=dataclasses.replace(
            DEFAULTS.workers,
            namespace=namespace,
            sync_timeout=worker_sync_timeout,
            status_interval=worker_status_interval,
            health_timeout=worker_health_timeout,
            lost_timeout=worker_lost_timeout,
            allow_exec_credentials=allow_exec_credentials,
            cluster_profiles=profile_settings(
                cluster_profiles, cluster_profile_selector, access_providers
            ),
        ),
        relay=dataclasses.replace(
            DEFAULTS.relay,
            keep_finished_mirrors=keep_finished_mirrors,
            finished_mirror_ttl=finished_mirror_ttl,
            unplaceable_retry=unplaceable_retry,
            pending_timeout=pending_timeout,
            status_batch_period=status_batch_period,
            create_namespaces=not no_create_namespaces,
            rejected_retry=rejected_retry,
            completed_events=completed_events,
            max_moves=max_moves,
            failed_worker_avoid_for=failed_worker_avoid_for,
            provisioning_candidates=provisioning_candidates,
        ),
        kinds=KindSettings(
            names=tuple(claim.name for claim in claims) or kind_settings.names,
            finished_conditions=finished_conditions or kind_settings.finished_conditions,
            managed_by=tuple((c.name, c.managed_by) for c in claims if c.managed_by),
            managed_by_fields=tuple(parse_field_flag(text) for text in managed_by_fields),
        ),
        leader_election=election,
        health_address=health_address,
        metrics_address=metrics_address,
        api=api,
        install_crds=install_crds,
        dependency_secret_namespaces=dependency_secret_namespaces,
    )
    election_client = manager_client(kubeconfig, context) if leader_elect else None
    review_client = manager_client(kubeconfig, context) if api.address else None
    try:
        event_loop_runner()(
            runner.run(
                manager, options, election_client=election_client, review_client=review_client
            )
        )
    except LeadershipLost:
        raise click.exceptions.Exit(1) from None  # the runner logged why
    except runner.ConfigurationError as error:
        raise click.ClickException(str(error)) from error
    except ApiError as error:
        raise click.ClickException(f"the management cluster answered: {error}") from error


@click.command()
@manager_options
@click.option("-n", "--namespace", default=workerclusters.DEFAULT_NAMESPACE, show_default=True,
              envvar="JOBRELAY_NAMESPACE",
              help="The controller's namespace to create ($JOBRELAY_NAMESPACE), as `helm -n` "
                   "names the release's; not a workload's.")  # fmt: skip
def install(kubeconfig: Path | None, context: str | None, namespace: str) -> None:
    """Check that jobrelay's CRDs are served, and create the controller's namespace.

    The CRDs are installed by the chart or an admin: this never writes one.
    """

    async def go() -> None:
        async with manager_client(kubeconfig, context) as client:
            await workerclusters.check_crds(client)
            await workerclusters.ensure_namespace(client, namespace)

    try:
        run_command(go())
    except workerclusters.RegistryError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"jobrelay's CRDs are served; namespace {namespace} is there")
