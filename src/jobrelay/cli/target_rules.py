"""Which kubeconfig is whose on `jobrelay clusters add` (pure).

``--kubeconfig``/``--context`` mean the management cluster on every command; the worker's
are ``--worker-kubeconfig``/``--worker-context``. ``clusters add NAME --kubeconfig W`` was
once the worker's and still is, with a deprecation warning, when no
``--worker-kubeconfig`` is given: then ``--context`` on ``add`` keeps its old meaning too
(the worker's context), and the manager is the group's flags or the environment's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ADD_NEEDS_WORKER = "clusters add NAME needs the worker's kubeconfig: --worker-kubeconfig FILE"


@dataclass(frozen=True)
class AddTargets:
    worker_kubeconfig: Path
    worker_context: str | None
    manager_kubeconfig: Path | None  # None: the environment's, as kubectl
    manager_context: str | None
    deprecations: tuple[str, ...] = ()


class TargetError(ValueError):
    """Flags that cannot be told apart (a usage error)."""


@dataclass(frozen=True)
class GivenFlags:
    """What `clusters add` was given: on ``add`` itself, and the manager's of the group."""

    worker_kubeconfig: Path | None = None
    worker_context: str | None = None
    kubeconfig: Path | None = None  # on `add`
    context: str | None = None  # on `add`
    group_kubeconfig: Path | None = None  # the group's (or $JOBRELAY_KUBECONFIG)
    group_context: str | None = None


def add_targets(given: GivenFlags) -> AddTargets:
    """The worker's and the manager's kubeconfig and context; TargetError when unclear."""
    if given.worker_kubeconfig is not None:
        return AddTargets(
            given.worker_kubeconfig,
            given.worker_context,
            given.kubeconfig or given.group_kubeconfig,
            given.context or given.group_context,
        )
    if given.kubeconfig is None:
        raise TargetError(ADD_NEEDS_WORKER)
    deprecations = [
        "`clusters add NAME --kubeconfig FILE` is deprecated: --kubeconfig means the "
        "management cluster on every command; use --worker-kubeconfig FILE"
    ]
    worker_context = given.worker_context
    if given.context is not None:
        if given.worker_context is not None:
            raise TargetError(
                "with the deprecated `add --kubeconfig WORKER`, --context is the worker's "
                "too: give --worker-kubeconfig, or drop --context or --worker-context"
            )
        worker_context = given.context
        deprecations.append(
            "with it, `add --context` is the worker's context: use --worker-context"
        )
    return AddTargets(
        given.kubeconfig, worker_context, given.group_kubeconfig, given.group_context,
        tuple(deprecations),
    )  # fmt: skip
