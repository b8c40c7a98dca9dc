"""The live pool of worker clusters (see pool.py), one record per worker (record.py).

Its concerns, one module each: the connection (connection.py: client,
credentials, rotation), liveness (liveness.py, with the pure Connected verdict
and lost clock in liveness_rules.py), the WorkerCluster status writer
(status_writer.py, pure rules in status_rules.py), the worker's facts, one feed each on
one shared lifecycle (feed_base.py: capacity_feed.py, Node and Pod informers feeding the
tracker; hop_feed.py, the objects operators make from mirrors, feeding the same tracker;
namespace_feed.py; claim_feed.py; dependency_feed.py, our copies there) and
what a refusal means (fleet/refusals.py).
"""

from jobrelay.fleet.workers.connection import ClientFactory, client_from_kubeconfig
from jobrelay.fleet.workers.pool import PoolOptions, WorkerPool, WorkerView
from jobrelay.fleet.workers.record import Worker, WorkerEventSink, WorkerRecord

__all__ = [
    "ClientFactory",
    "PoolOptions",
    "Worker",
    "WorkerEventSink",
    "WorkerPool",
    "WorkerRecord",
    "WorkerView",
    "client_from_kubeconfig",
]
