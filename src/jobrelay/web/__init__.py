"""The controller's own HTTP side (probes today).

- ``probe_server``: ``/healthz`` and ``/readyz`` with the replica's role, ``/metrics``
"""
