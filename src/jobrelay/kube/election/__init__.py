"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

- ``election_rules``: pure: the Lease record, what this process observed of it, the
  decision "may I take or renew it now" (no I/O, no clock of its own), and a reader's
  verdict on whether a controller holds it freshly (``lease_freshness``)
- ``elector``: the :class:`~jobrelay.kube.election.elector.Elector` that does
  their I/O: campaign, renew, release
"""
