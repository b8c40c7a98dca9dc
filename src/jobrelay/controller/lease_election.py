"""The controller's elector: its Lease (named by --lease-name, in the workers'
namespace), its timing, and what its annotations say of this replica (its version,
the kinds it claims and under which managedBy value)."""

from __future__ import annotations

from collections.abc import Sequence

import jobrelay
from jobrelay.controller.options import ControllerOptions
from jobrelay.kinds import WorkloadKind
from jobrelay.kinds.managed_by_claims import lease_entry
from jobrelay.kube.client import ApiClient
from jobrelay.kube.election.election_rules import ElectionTiming
from jobrelay.kube.election.elector import Elector
from jobrelay.vocabulary.names import KINDS_ANNOTATION, VERSION_ANNOTATION

__all__ = ["election_timing", "elector_for"]


def election_timing(options: ControllerOptions) -> ElectionTiming:
    election = options.leader_election
    return ElectionTiming(election.lease_duration, election.renew_deadline, election.retry_period)


def elector_for(
    options: ControllerOptions,
    kinds: Sequence[WorkloadKind],
    *,
    manager: ApiClient,
    election_client: ApiClient | None,
    identity: str,
) -> Elector | None:
    """The elector of this replica; None without leader election."""
    if not options.leader_election.enabled:
        return None
    if election_client is None or election_client is manager:
        # The manager's client is fenced; the elector's must not be.
        raise ValueError("leader election needs a client of its own (election_client)")
    claimed = dict(options.kinds.managed_by)
    return Elector(
        election_client,
        namespace=options.workers.namespace,
        name=options.lease_name,
        identity=identity,
        timing=election_timing(options),
        annotations={
            VERSION_ANNOTATION: jobrelay.__version__,
            KINDS_ANNOTATION: ",".join(
                lease_entry(kind.name, claimed.get(kind.name), kind.managed_by_field)
                for kind in kinds
            ),
        },
    )
