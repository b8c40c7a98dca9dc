"""`jobrelay version`: this client's version and the controller's, as `kubectl version`.

The controller's is what its leader records on the leader election Lease with every
renewal (``jobrelay.dev/version``, next to ``jobrelay.dev/kinds``): the Lease named like
`jobrelay run` names it, from --namespace and --controller-name (or --leader-election-id).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import jobrelay
from jobrelay.cli.common import manager_client, manager_options, run_command
from jobrelay.cli.controller_namespace import namespace_default_help
from jobrelay.cli.terminal import safe
from jobrelay.vocabulary.names import (
    DEFAULT_CONTROLLER_NAME,
    KINDS_ANNOTATION,
    VERSION_ANNOTATION,
)

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient
    from jobrelay.kube.election.election_rules import LeaseFreshness


# What is read of the Lease: a version or holder is short, the kinds a few dozen at most.
_FIELD_CHARS = 253
_MAX_KINDS = 64
_KINDS_BYTES = 16 * 1024


@dataclass(frozen=True)
class Leader:
    """What the controller's leader says of itself on its Lease."""

    lease: str  # namespace/name
    holder: str  # "" when no one holds it
    version: str  # "" when the leader records none (older than this)
    kinds: tuple[str, ...]  # Kind.version.group; () when not recorded
    # Whether its holder still renews it, judged at the read (None: not judged).
    freshness: LeaseFreshness | None = None

    @classmethod
    def of(cls, lease: dict[str, Any], now: datetime | None = None) -> Leader:
        from jobrelay.kube.election.election_rules import lease_freshness

        metadata = lease.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        # Whoever may update the Lease writes these: bounded before anything reads them.
        kinds = str(annotations.get(KINDS_ANNOTATION) or "")[:_KINDS_BYTES]
        return cls(
            f"{metadata.get('namespace')}/{metadata.get('name')}",
            str((lease.get("spec") or {}).get("holderIdentity") or "")[:_FIELD_CHARS],
            str(annotations.get(VERSION_ANNOTATION) or "")[:_FIELD_CHARS],
            tuple(kind for kind in kinds.split(",") if kind)[:_MAX_KINDS],
            None if now is None else lease_freshness(lease, now),
        )


class NoLease(click.ClickException):
    """No Lease where `jobrelay run` would hold it."""


async def read_leader(
    client: ApiClient, namespace: str, lease_name: str, now: datetime | None = None
) -> Leader:
    """The leader's Lease; its freshness judged at ``now`` when given. NoLease on a 404."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import LEASES

    try:
        lease = await client.get(LEASES, lease_name, namespace=namespace)
    except ApiError as error:
        if error.is_not_found:
            raise NoLease(
                f"no Lease {namespace}/{lease_name}: no jobrelay controller has run against "
                "this manager, so workloads are not dispatched; is `jobrelay run` running "
                "with leader election here (else pass its --namespace and --controller-name)?"
            ) from None
        raise
    return Leader.of(lease, now)


def lease_options(func: Any) -> Any:
    """Where the controller's Lease is: as `jobrelay run` names it."""
    func = click.option(
        "--leader-election-id", "lease_name", default=None,
        help="The Lease's name, as `jobrelay run --leader-election-id` [default: from "
             "--controller-name].",
    )(func)  # fmt: skip
    func = click.option(
        "--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
        help="The controller's name (`jobrelay run --controller-name`).",
    )(func)  # fmt: skip
    func = click.option(
        "-n", "--namespace", "lease_namespace", default=None,
        help="The controller's namespace (`jobrelay run --namespace`), where its Lease is; "
             f"not a workload's [default: {namespace_default_help()}].",
    )(func)  # fmt: skip
    return func


def document(leader: Leader | None) -> dict[str, Any]:
    """``-o json|yaml``: kubectl's shape (clientVersion, serverVersion)."""
    answer: dict[str, Any] = {"clientVersion": {"version": jobrelay.__version__}}
    if leader is not None:
        answer["serverVersion"] = {
            "version": leader.version or None,
            "leader": leader.holder or None,
            "lease": leader.lease,
            "kinds": list(leader.kinds),
        }
        if leader.freshness is not None:
            renewed = leader.freshness.renewed_at
            answer["serverVersion"]["leaseState"] = str(leader.freshness.state)
            answer["serverVersion"]["renewTime"] = None if renewed is None else renewed.isoformat()
    return answer


def dump(answer: dict[str, Any], output: str) -> str:
    import json

    import yaml

    if output == "json":
        return json.dumps(answer, indent=4)
    return yaml.safe_dump(answer, sort_keys=False).rstrip("\n")


def server_line(leader: Leader, now: datetime | None = None) -> str:
    """``Server Version: V (leader H, Lease NS/NAME)``; when the Lease is stale, which
    controller last held it and when, as `jobrelay get` warns."""
    from jobrelay.kube.election.election_rules import LeaseState

    version = leader.version or "unknown (its leader does not record it: an older jobrelay)"
    freshness = leader.freshness
    if freshness is not None and now is not None and freshness.state is LeaseState.STALE:
        from jobrelay.cli.controller_lease import lease_state_text

        stale = lease_state_text(freshness, leader.lease, now)
        return safe(f"Server Version: {version} (stale: no controller leads now; {stale})")
    who = f"leader {leader.holder}" if leader.holder else "no leader now"
    return safe(f"Server Version: {version} ({who}, Lease {leader.lease})")


@click.command()
@click.option("--client", "client_only", is_flag=True, help="The client's version only.")
@click.option("-o", "--output", type=click.Choice(["json", "yaml"]), default=None,
              help="json or yaml instead of lines.")  # fmt: skip
@lease_options
@manager_options
def version(
    client_only: bool,
    output: str | None,
    lease_namespace: str | None,
    controller_name: str,
    lease_name: str | None,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """Print the client's version and the controller's (from its leader's Lease)."""
    if client_only:
        if output:
            click.echo(dump(document(None), output))
        else:
            click.echo(f"Client Version: {jobrelay.__version__}")
        return

    from jobrelay.cli.controller_lease import controller_lease_warning
    from jobrelay.vocabulary.leases import lease_name_for  # not at start-up: --help is quick

    now = datetime.now(UTC)

    async def go() -> Leader:
        from jobrelay.cli.controller_namespace import locate_controller

        name = lease_name or lease_name_for(controller_name)
        async with manager_client(kubeconfig, context) as client:
            located = await locate_controller(client, lease_namespace, name, now)
            return await read_leader(client, located.namespace, name, now)

    if not output:
        click.echo(f"Client Version: {jobrelay.__version__}")
    try:
        leader = run_command(go())
    except click.ClickException:
        if output:
            click.echo(dump(document(None), output))
        raise
    if output:
        click.echo(dump(document(leader), output))
    else:
        click.echo(server_line(leader, now))
    # stdout keeps its two lines (scripts read them); the warning is `get`'s, on stderr.
    warning = controller_lease_warning(leader.freshness, leader.lease, now, "--namespace")
    if warning:
        click.echo(warning, err=True)
