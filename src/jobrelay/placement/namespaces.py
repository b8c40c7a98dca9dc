"""Which worker namespaces this manager may create mirrors in (pure).

A worker's namespace is its admin's, and whoever runs there owns its
ServiceAccounts, Secrets and volumes: a mirror goes only into a namespace that
carries the label ``jobrelay.dev/origin: <this manager's origin>``. jobrelay sets
that label on the namespaces it creates; a worker's admin opts an existing one in
by adding it. Never used: ``kube-*`` (the worker's own) and the namespace of the
credential jobrelay holds there (its token lives there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobrelay.placement.not_known import NotKnownYet
from jobrelay.vocabulary.names import ORIGIN_LABEL

__all__ = [
    "WorkerNamespaces",
    "credential_namespace",
    "namespace_refusal",
    "opt_in_hint",
]

_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class WorkerNamespaces:
    """A worker's namespaces as placement sees them, with this manager's terms."""

    # This manager's origin, and whether it creates a namespace a worker lacks.
    origin: str
    create: bool = True
    # Its namespace informer has listed: what ``origins`` lacks is really absent.
    synced: bool = False
    # Each namespace there and the value of its jobrelay.dev/origin label (None: none).
    origins: Mapping[str, str | None] = field(default_factory=dict)
    # The namespace of jobrelay's own credential there (its ServiceAccount), if known.
    credential: str | None = None

    def refusal(self, namespace: str) -> str | NotKnownYet | None:
        return namespace_refusal(namespace, self)


def opt_in_hint(origin: str) -> str:
    return f"label {ORIGIN_LABEL}={origin}"


def namespace_refusal(namespace: str, worker: WorkerNamespaces) -> str | NotKnownYet | None:
    """Why no mirror may be created in ``namespace`` on this worker (None: it may;
    :class:`NotKnownYet` while its namespaces have not listed)."""
    if namespace.startswith("kube-"):
        return f"namespace {namespace} is the worker's own (kube-*): jobrelay never uses it"
    if worker.credential is not None and namespace == worker.credential:
        return (
            f"namespace {namespace} holds jobrelay's credential there: jobrelay never "
            "creates mirrors in it"
        )
    if not worker.synced:
        return NotKnownYet.NAMESPACES
    if namespace not in worker.origins:
        if worker.create:
            return None  # created with the label (controller/relay/executor.py)
        return (
            f"namespace {namespace} does not exist there and namespace creation is turned "
            f"off (its admin may create it with the {opt_in_hint(worker.origin)})"
        )
    if worker.origins[namespace] == worker.origin:
        return None
    return (
        f"namespace {namespace} exists there and is not open to this manager "
        f"({opt_in_hint(worker.origin)})"
    )


def credential_namespace(username: str) -> str | None:
    """The namespace of a ServiceAccount's username (``system:serviceaccount:NS:NAME``);
    None for any other user."""
    if not username.startswith(_SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username[len(_SERVICE_ACCOUNT_PREFIX) :].partition(":")
    return namespace if sep and namespace and name else None
