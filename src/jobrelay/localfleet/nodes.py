"""Simulated nodes for each cluster, and the workers' registration with the manager."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from jobrelay.fleet import relayqueues, workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NODES
from jobrelay.localfleet.shape import FLEET_PREFIX, ClusterShape
from jobrelay.vocabulary.timestamps import utc_now

NODE_READY_TIMEOUT = 60.0
FLEET_LABEL = f"{FLEET_PREFIX}cluster"
# On every WorkerCluster the local fleet registers, besides the configuration's labels.
LOCAL_WORKER_LABELS = {f"{FLEET_PREFIX}local": "true"}


class NodesNotReady(RuntimeError):
    """KWOK did not make a cluster's simulated nodes Ready in time."""

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(message)
        self.cluster = cluster


def kwok_node(
    name: str,
    cluster: str,
    capacity: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A KWOK node of ``cluster``: ``labels`` besides the ones the fleet relies on, which
    they may not change; its capacity is also its allocatable."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                # The configuration may set os and arch, never what the fleet relies on.
                **(labels or {}),
                "type": "kwok",  # kwok manages nodes with this label
                "kubernetes.io/hostname": name,
                FLEET_LABEL: cluster,
            },
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        # The node-initialize stage copies this capacity into the node's status.
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
    }


def node_manifest(cluster: str, index: int, shape: ClusterShape) -> dict[str, Any]:
    manifest = kwok_node(f"{cluster}-node-{index}", cluster, shape.capacity(), shape.node_labels)
    if shape.taints:
        manifest["spec"] = {
            "taints": [
                {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
                for t in shape.taints
            ]
        }
    return manifest


async def _ensure_nodes(
    client: ApiClient, cluster: str, shape: ClusterShape, *, light: bool = False
) -> None:
    for index in range(1, shape.nodes + 1):
        manifest = node_manifest(cluster, index, shape)
        try:
            stored = await client.create(NODES, manifest)
        except ApiError as error:
            if not error.is_already_exists:
                raise
            stored = await client.get(NODES, manifest["metadata"]["name"])
        if light and not _is_ready(stored):
            # No kwok on a light worker: its nodes are made Ready once, here, and stay so
            # (no kubelet leases, no node lifecycle controller to mark them otherwise).
            await client.replace(
                NODES,
                {**stored, "status": ready_node_status(manifest, utc_now())},
                subresource="status",
            )
    deadline = asyncio.get_running_loop().time() + NODE_READY_TIMEOUT
    while True:
        nodes = (await client.list(NODES, label_selector=f"{FLEET_LABEL}={cluster}")).items
        ready = [node for node in nodes if _is_ready(node)]
        if len(ready) >= shape.nodes:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise NodesNotReady(
                cluster,
                f"{cluster}: only {len(ready)} of {shape.nodes} simulated nodes became Ready "
                f"within {NODE_READY_TIMEOUT:.0f}s",
            )
        await asyncio.sleep(0.2)


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def prepare_clusters(
    kubeconfigs: Mapping[str, Path],
    *,
    manager: str,
    shapes: Mapping[str, ClusterShape],
    light: Collection[str] = (),
) -> None:
    """Create every cluster's nodes (made Ready here on the ``light`` workers), then register
    each worker with the manager, with its shape's labels."""
    clients = {
        name: ApiClient.from_kubeconfig(path, cluster=name) for name, path in kubeconfigs.items()
    }
    try:
        await asyncio.gather(
            *(
                _ensure_nodes(client, name, shapes[name], light=name in light)
                for name, client in clients.items()
            )
        )
        manager_client = clients[manager]
        await workerclusters.install_crd(manager_client)
        await workerclusters.install_crd(manager_client, manifest=relayqueues.crd_manifest())
        for name, path in kubeconfigs.items():
            if name != manager:
                await workerclusters.register(
                    manager_client,
                    name,
                    workerclusters.inline_kubeconfig(path),
                    labels={**shapes[name].labels, **LOCAL_WORKER_LABELS},
                    autoscaling=_autoscaling(shapes[name]),
                )
    finally:
        await asyncio.gather(*(client.aclose() for client in clients.values()))


def _autoscaling(shape: ClusterShape) -> dict[str, Any] | None:
    # A worker with the stand-in autoscaler is registered as autoscaled, its shapes set.
    return shape.autoscaler.worker_cluster_autoscaling() if shape.autoscaler else None


def ready_node_status(node: Mapping[str, Any], now: str) -> dict[str, Any]:
    """A simulated node's status as kwok's node-initialize stage writes it: Ready, its
    capacity and allocatable as given, addresses on 127.0.0.1."""
    status = node.get("status") or {}
    conditions = [
        {
            "type": kind,
            "status": "True" if kind == "Ready" else "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind, reason, message in (
            ("Ready", "KubeletReady", "the job stand-in plays this node's kubelet"),
            ("MemoryPressure", "KubeletHasSufficientMemory", "no memory pressure"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "no PID pressure"),
            ("NetworkUnavailable", "RouteCreated", "network is fine"),
        )
    ]
    name = str(node["metadata"]["name"])
    return {
        "capacity": status.get("capacity") or {},
        "allocatable": status.get("allocatable") or status.get("capacity") or {},
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "containerRuntimeVersion": "jobrelay-standin",
            "kernelVersion": "jobrelay-standin",
            "kubeletVersion": "jobrelay-standin",
            "kubeProxyVersion": "jobrelay-standin",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "osImage": "",
        },
        "phase": "Running",
    }
