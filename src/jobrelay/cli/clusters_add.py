"""`jobrelay clusters add`: register a worker cluster from its kubeconfig (stored in a
Secret), optionally through a ServiceAccount it creates there first.
"""

from __future__ import annotations

from pathlib import Path

import click

from jobrelay.cli.clusters_options import (
    allow_exec_option,
    kind_option,
    locate_for_verb,
    manager_kubeconfig,
    namespace_option,
    run_verb,
)
from jobrelay.cli.common import checked_origin, given_manager_flags, manager_client
from jobrelay.cli.target_rules import GivenFlags, TargetError, add_targets
from jobrelay.fleet import origin_record, serviceaccount, workerclusters
from jobrelay.fleet.credentials import KubeconfigRefused
from jobrelay.kinds.catalog import KindError, kinds_from_names
from jobrelay.kinds.managed_by_claims import parse_kind_flag
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, KubeconfigError
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

__all__ = ["add"]


@click.command()
@click.argument("name")
@click.option("--worker-kubeconfig", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The worker's kubeconfig (required).")  # fmt: skip
@click.option("--worker-context", default=None,
              help="Context in the worker's kubeconfig [default: its current one].")  # fmt: skip
@click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The management cluster's kubeconfig [default: the group's, $KUBECONFIG, "
                   "~/.kube/config]. DEPRECATED meaning, without --worker-kubeconfig: the "
                   "worker's (a warning says so).")  # fmt: skip
@click.option("--context", default=None,
              help="The management cluster's context; with the deprecated `--kubeconfig "
                   "WORKER`, the worker's.")  # fmt: skip
@click.option(
    "--label", "labels", multiple=True, help="k=v label on the WorkerCluster (repeatable)."
)
@click.option("--create-service-account", is_flag=True,
              help="Use --worker-kubeconfig (an admin's) only to create on the worker a ServiceAccount "
                   "with the minimal ClusterRole (charts/jobrelay-worker) and a token; register "
                   "the worker with that token. The admin's credentials are not stored.")  # fmt: skip
@click.option("--service-account-namespace", default=serviceaccount.DEFAULT_NAMESPACE,
              show_default=True, help="With --create-service-account: its namespace on the worker.")  # fmt: skip
@click.option("--service-account-name", default=None,
              help="With --create-service-account: the ServiceAccount, ClusterRole, binding and "
                   "admission policy [default: jobrelay-worker-ORIGIN].")  # fmt: skip
@click.option("--origin", default=None, callback=checked_origin,
              help="With --create-service-account: the manager's origin (`jobrelay run --origin`), "
                   "the only one the worker's admission policy lets write there [default: the "
                   "origin the controller recorded, else this management cluster's kube-system "
                   "UID].")  # fmt: skip
@click.option("--create-namespaces/--no-create-namespaces", default=True, show_default=True,
              help="With --create-service-account: may jobrelay create workloads' namespaces "
                   "there (match `jobrelay run --no-create-namespaces`).")  # fmt: skip
@kind_option
@allow_exec_option
@manager_kubeconfig
@namespace_option
def add(
    name: str,
    worker_kubeconfig: Path | None,
    worker_context: str | None,
    kubeconfig: Path | None,
    context: str | None,
    labels: tuple[str, ...],
    create_service_account: bool,
    service_account_namespace: str,
    service_account_name: str | None,
    origin: str | None,
    create_namespaces: bool,
    kind_names: tuple[str, ...],
    allow_exec_credentials: bool,
    manager_kubeconfig: Path | None,
    namespace: str | None,
) -> None:
    """Register worker NAME from its kubeconfig, --worker-kubeconfig (stored, files
    inlined, in a Secret).

    Refused (exit 1, naming the field): tokenFile, auth-provider,
    insecure-skip-tls-verify, and exec plugins unless --allow-exec-credentials.

    The Secret goes where the controller reads it: its namespace is found (see
    -n). With --create-service-account, the worker's rights cover the kinds the
    controller's leader records on its Lease, unless --kind is given.
    """
    group = click.get_current_context().parent
    group_kubeconfig, group_context = given_manager_flags(group) if group else (None, None)
    try:
        targets = add_targets(
            GivenFlags(
                worker_kubeconfig, worker_context, kubeconfig, context,
                manager_kubeconfig or group_kubeconfig, group_context,
            )
        )  # fmt: skip
    except TargetError as error:
        raise click.UsageError(str(error)) from None
    if targets.worker_kubeconfig == kubeconfig and not targets.worker_kubeconfig.is_file():
        raise click.BadParameter(f"{kubeconfig} is not a file", param_hint="--kubeconfig")
    for deprecation in targets.deprecations:
        click.echo(f"warning: {deprecation}", err=True)
    worker, worker_context = targets.worker_kubeconfig, targets.worker_context
    # --manager-kubeconfig can only mean the manager: it wins.
    manager = (manager_kubeconfig or targets.manager_kubeconfig, targets.manager_context)
    parsed = {}
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{label!r} is not k=v", param_hint="--label")
        parsed[key] = value
    try:
        # `jobrelay run --kind`'s syntax: a claimed =VALUE changes nothing here.
        kind_names = tuple(parse_kind_flag(n).name for n in kind_names)
        if kind_names:
            kinds_from_names(kind_names)
    except KindError as error:
        raise click.BadParameter(str(error), param_hint="--kind") from error
    try:
        # With --create-service-account the admin's kubeconfig is only used here, by the
        # admin, and never stored: what is stored is the ServiceAccount's token.
        stored = workerclusters.inline_kubeconfig(
            worker, worker_context,
            allow_exec=allow_exec_credentials or create_service_account,
        )  # fmt: skip
    except workerclusters.RegistryError as error:
        raise click.ClickException(str(error)) from None
    except KubeconfigRefused as error:
        raise click.ClickException(f"kubeconfig {worker}: {error}") from None
    account = serviceaccount.WorkerAccount(
        service_account_namespace, service_account_name or serviceaccount.DEFAULT_ACCOUNT
    )

    where = [namespace or ""]

    async def go() -> None:
        nonlocal stored, account
        async with manager_client(*manager) as client:
            # Before anything is written on the worker: the CLI never writes CRDs.
            await workerclusters.check_crds(client)
            where[0], found_kinds = await locate_for_verb(
                client, namespace, kind_names, DEFAULT_CONTROLLER_NAME,
                need_kinds=create_service_account,
            )  # fmt: skip
        if create_service_account:
            try:
                kinds = [kind.ref for kind in kinds_from_names(found_kinds)]
            except KindError as error:  # a kind of the Lease this jobrelay does not know
                raise workerclusters.RegistryError(
                    f"{error}: pass --kind for the kinds the worker runs"
                ) from None
            mirrors_of = origin or None
            if mirrors_of is None:
                async with manager_client(*manager) as client:
                    mirrors_of = await origin_record.manager_origin(
                        client, where[0], DEFAULT_CONTROLLER_NAME
                    )
            if service_account_name is None:
                name_of = serviceaccount.account_name(mirrors_of)
                account = serviceaccount.WorkerAccount(service_account_namespace, name_of)
            rules = serviceaccount.worker_rules(kinds, create_namespaces=create_namespaces)
            policy = serviceaccount.admission_policy(account, mirrors_of, kinds)
            cluster_entry = stored["clusters"][0]["cluster"]
            try:
                async with ApiClient.from_kubeconfig(worker, worker_context, cluster=name) as admin:
                    created = await serviceaccount.create_service_account(
                        admin, name, cluster_entry, account, rules, policy=policy
                    )
            except (ApiError, KubeconfigError) as error:
                raise workerclusters.RegistryError(
                    f"cannot create jobrelay's ServiceAccount on worker cluster {name} ({error}): "
                    "--worker-kubeconfig must be allowed to apply Namespaces, ServiceAccounts, "
                    "Secrets, ClusterRoles, ClusterRoleBindings and ValidatingAdmissionPolicies (and their "
                    "bindings) there"
                ) from error
            for line in created.applied:
                click.echo(f"applied on {name}: {line}")
            stored = created.kubeconfig  # the admin's credentials go no further
        async with manager_client(*manager) as client:
            await workerclusters.register(client, name, stored, labels=parsed, namespace=where[0])

    try:
        run_verb(go())
    except workerclusters.RegistryError as error:
        raise click.ClickException(str(error)) from error
    as_whom = f" as {account.username}" if create_service_account else ""
    click.echo(f"registered worker cluster {name}{as_whom}")
    click.echo(
        f"its kubeconfig is in Secret {where[0]}/{workerclusters.secret_name(name)}, where "
        "the controller reads it",
        err=True,
    )
