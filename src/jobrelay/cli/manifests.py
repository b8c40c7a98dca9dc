"""`jobrelay manifests`: print the chart's manifests filled in for jobrelay's settings (for an
install without the chart)."""

from __future__ import annotations

import re

import click

from jobrelay.cli.common import checked_field_flags, checked_kind_names
from jobrelay.manifests.admission_policy import (
    CONTROLLER_NAMESPACE,
    CONTROLLER_SERVICE_ACCOUNT,
    DEFAULT_POLICY_KINDS,
    admission_policy_yaml,
)
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _dns_label(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if not _DNS_LABEL.fullmatch(value):
        raise click.BadParameter(f"{value[:80]!r} is not a namespace name (a DNS label)")
    return value


def _dns_subdomain(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise click.BadParameter(f"{value[:80]!r} is not a ServiceAccount name")
    return value


def _controller_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if not value or len(value) > 63 or not value.isprintable():
        raise click.BadParameter("a spec.managedBy value: 1 to 63 printable characters")
    return value


@click.group()
def manifests() -> None:
    """Print manifests generated from jobrelay's settings (apply them with kubectl)."""


@manifests.command("admission-policy")
@click.option("--kind", "kinds", multiple=True, callback=checked_kind_names, metavar="Kind.version.group[=VALUE]",
              help="A kind the controller dispatches (repeatable, as `jobrelay run --kind`, "
                   "=VALUE the managedBy value it claims); "
                   f"default: {', '.join(DEFAULT_POLICY_KINDS)}. A kind without an adapter "
                   "is matched under its conventional plural.")  # fmt: skip
@click.option("--managed-by-field", "managed_by_fields", multiple=True, callback=checked_field_flags,
              metavar="Kind.version.group=FIELD",
              help="Where a kind without an adapter keeps managedBy (as `jobrelay run`).")  # fmt: skip
@click.option("--controller-namespace", default=CONTROLLER_NAMESPACE, show_default=True,
              callback=_dns_label,
              help="Namespace of the controller's ServiceAccount.")  # fmt: skip
@click.option("--controller-service-account", default=CONTROLLER_SERVICE_ACCOUNT,
              show_default=True, callback=_dns_subdomain, help="The controller's ServiceAccount.")  # fmt: skip
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              callback=_controller_name,
              help="The spec.managedBy value of the workloads to dispatch (as `jobrelay run`).")  # fmt: skip
def admission_policy(
    kinds: tuple[str, ...],
    managed_by_fields: tuple[str, ...],
    controller_namespace: str,
    controller_service_account: str,
    controller_name: str,
) -> None:
    """The manager's ValidatingAdmissionPolicies: only the controller places a workload
    (every kind with its /status subresource), and it creates Pods only as dry runs."""
    click.echo(
        admission_policy_yaml(
            kinds,
            controller_namespace=controller_namespace,
            controller_service_account=controller_service_account,
            controller_name=controller_name,
            managed_by_fields=managed_by_fields,
        ),
        nl=False,
    )
