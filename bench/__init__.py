"""jobrelay's benchmark harness: ``python -m bench`` (see ``docs/performance.md``).

It brings up (or reuses) a local fleet, runs the controller as a separate
process, drives Jobs through it from this process, and measures from the
apiservers' own watch streams and ``/metrics``.
"""
