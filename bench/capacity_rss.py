"""``python -m bench.capacity_rss``: what one worker's capacity caches cost the controller.

Pure, no fleet: generates Node and Pod API objects as an apiserver sends them (labels,
owner references, several containers with requests, conditions, managedFields), each
decoded from JSON bytes like a real list page, slims each at once through the
informers' transforms and keeps the slim objects the way the informers do (a dict by
``namespace/name``) while feeding a CapacityTracker. Raw objects are dropped as they
go, so what is measured (tracemalloc: Python's own allocations; and the process RSS)
is only what the caches keep. Target: 5,000 nodes and 100,000 pods well under 200 MiB.
Also prints the time to build ``capacity()`` from scratch, the time per incremental
pod event, and the time to rebuild ``capacity()`` after one event.
"""

from __future__ import annotations

import gc
import resource
import time
import tracemalloc
from typing import Any

import click
import msgspec

from jobrelay.kinds.job.pod_labels import JOB_NAME_LABEL
from jobrelay.kube.watching import object_key
from jobrelay.placement.slim_objects import slim_node, slim_pod
from jobrelay.placement.tracker import CapacityTracker

TARGET_MIB = 200.0
_MANAGED = [
    {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {f"f:{k}": {f"f:{j}": {} for j in range(12)} for k in range(8)},
    }
    for manager in ("kube-controller-manager", "kube-scheduler", "kubelet")
]


def node_object(index: int) -> dict[str, Any]:
    gpu = index % 10 == 0
    allocatable = {"cpu": "63900m", "memory": "251Gi", "pods": "110", "ephemeral-storage": "900Gi"}
    if gpu:
        allocatable["nvidia.com/gpu"] = "8"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{index:05d}",
            "uid": f"6c1f0b5e-{index:08d}-4f1a-9c1e-000000000000",
            "resourceVersion": str(1000 + index),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": f"node-{index:05d}",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": f"zone-{index % 3}",
                "node.kubernetes.io/instance-type": "gpu-8" if gpu else "cpu-64",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/x": "true"},
            "managedFields": _MANAGED,
        },
        "spec": {
            "podCIDR": f"10.{index // 256}.{index % 256}.0/24",
            "taints": (
                [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
                if gpu
                else []
            ),
        },
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "reason": f"Kubelet{kind}",
                    "message": f"kubelet reports {kind}",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{index // 256}.{index % 256}"}],
            "images": [
                {"names": [f"registry/image-{i}:v1"], "sizeBytes": 10**8} for i in range(10)
            ],
            "nodeInfo": {"kubeletVersion": "v1.35.4", "containerRuntimeVersion": "containerd://2"},
        },
    }


def pod_object(index: int, nodes: int) -> dict[str, Any]:
    job = f"job-{index // 10:05d}"
    bound = index % 20 != 0  # one pod in twenty is still pending
    container = {
        "image": "registry/worker:v1",
        "command": ["/bin/worker", "--shard", str(index)],
        "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(5)],
        "resources": {
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"cpu": "1", "memory": "2Gi"},
        },
    }
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        if bound
        else {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/5000 nodes are available: insufficient cpu.",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    spec: dict[str, Any] = {
        "initContainers": [{**container, "name": "init"}],
        "containers": [{**container, "name": f"c{i}"} for i in range(3)],
        "restartPolicy": "Never",
        "serviceAccountName": "default",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
    }
    if bound:
        spec["nodeName"] = f"node-{index % nodes:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index % 10}-x7k2q",
            "generateName": f"{job}-",
            "namespace": f"team-{index % 50}",
            "uid": f"8a2e4f6d-{index:08d}-4b1c-8d2e-000000000000",
            "resourceVersion": str(100000 + index),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                JOB_NAME_LABEL: job,
                "job-name": job,
                "batch.kubernetes.io/controller-uid": f"uid-{index // 10}",
                "controller-uid": f"uid-{index // 10}",
                "batch.kubernetes.io/job-completion-index": str(index % 10),
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"uid-{index // 10}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": _MANAGED,
        },
        "spec": spec,
        "status": {
            "phase": "Running" if bound else "Pending",
            "conditions": conditions,
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
            "startTime": "2026-01-01T00:00:00Z",
        },
    }


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def _decoded(obj: dict[str, Any]) -> dict[str, Any]:
    # As a list page arrives: fresh strings and dicts for every object.
    decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(obj))
    return decoded


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--nodes", default=5000, show_default=True, type=click.IntRange(1))
@click.option("--pods", default=100_000, show_default=True, type=click.IntRange(0))
@click.option("--events", default=10_000, show_default=True, type=click.IntRange(1))
@click.option(
    "--tracemalloc/--no-tracemalloc",
    "trace",
    default=True,
    show_default=True,
    help="Count the caches' own allocations (slower; its bookkeeping inflates the RSS).",
)
def main(nodes: int, pods: int, events: int, trace: bool) -> None:
    gc.collect()
    rss_before = _rss_mib()
    if trace:
        tracemalloc.start()
    node_cache: dict[str, dict[str, Any]] = {}
    pod_cache: dict[str, dict[str, Any]] = {}
    tracker = CapacityTracker()
    started = time.perf_counter()
    for index in range(nodes):
        slim = slim_node(_decoded(node_object(index)))
        node_cache[object_key(slim)] = slim
        tracker.set_node(slim)
    for index in range(pods):
        pod = slim_pod(_decoded(pod_object(index, nodes)))
        if pod is not None:
            key = object_key(pod)
            pod_cache[key] = pod
            tracker.set_pod(key, pod)
    fed = time.perf_counter() - started
    gc.collect()
    rss_after = _rss_mib()
    kept = tracemalloc.get_traced_memory()[0] if trace else int((rss_after - rss_before) * 2**20)
    tracemalloc.stop()
    kept_mib = kept / 2**20
    objects = nodes + len(pod_cache)
    click.echo(
        f"{nodes} nodes, {len(pod_cache)} pods fed in {fed:.1f} s "
        f"(decode, slim, track: {fed / max(objects, 1) * 1e6:.0f} us per object)"
    )
    click.echo(
        f"caches keep {kept_mib:.1f} MiB ({'tracemalloc' if trace else 'RSS growth'}), "
        f"{kept / max(objects, 1):.0f} bytes per object; "
        f"RSS {rss_before:.0f} -> {rss_after:.0f} MiB (+{rss_after - rss_before:.0f})"
    )

    started = time.perf_counter()
    capacity = tracker.capacity()
    build = (time.perf_counter() - started) * 1000
    click.echo(f"capacity() from scratch: {build:.1f} ms ({capacity!r})")
    assert tracker.capacity() is capacity

    keys = list(pod_cache)
    rebuild_total = 0.0
    started = time.perf_counter()
    for number in range(events):
        key = keys[number % len(keys)] if keys else "none/none"
        pod = pod_cache.get(key)
        if pod is None:
            continue
        # The pod moves to another node (an update), as a churn of deletes and re-adds does.
        moved = {**pod, "nodeName": f"node-{(number * 7919) % nodes:05d}"}
        tracker.set_pod(key, moved)
        pod_cache[key] = moved
    per_event = (time.perf_counter() - started) / events * 1e6
    for _ in range(20):
        tracker.set_pod(keys[0], {**pod_cache[keys[0]], "nodeName": "node-00000"})
        tracker.set_pod(keys[0], pod_cache[keys[0]])
        started = time.perf_counter()
        tracker.capacity()
        rebuild_total += time.perf_counter() - started
    click.echo(
        f"incremental pod event: {per_event:.1f} us; "
        f"capacity() after one event: {rebuild_total / 20 * 1000:.2f} ms"
    )
    verdict = "within" if kept_mib < TARGET_MIB else "OVER"
    click.echo(f"{kept_mib:.1f} MiB kept: {verdict} the {TARGET_MIB:g} MiB target")


if __name__ == "__main__":
    main()
