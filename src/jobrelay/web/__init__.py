"""The controller's own HTTP side (probes today).

- ``health``: ``/healthz`` and ``/readyz`` with the replica's role
"""
