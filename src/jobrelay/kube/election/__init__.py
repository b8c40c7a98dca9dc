"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

- ``rules``: pure: the Lease record, what this process observed of it, and the
  decision "may I take or renew it now" (no I/O, no clock of its own)
- ``elector``: the :class:`~jobrelay.kube.election.elector.Elector` that does
  their I/O: campaign, renew, release
"""
