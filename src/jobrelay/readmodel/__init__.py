"""The read model: a workload's, a worker's and a queue's row, computed once. Pure.

`jobrelay get`, `clusters`, `top` and `queues` render these rows as text, the
panel (relayapi/panel_rules.py) as JSON, and the controller's gauges count the
workloads' states (kinds/standing.py): one computation, three renderings.
"""
