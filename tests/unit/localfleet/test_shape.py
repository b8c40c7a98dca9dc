"""The fleet configuration (`fleet up --config`): what it accepts, what it refuses and how it says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.localfleet import nodes, shape
from jobrelay.localfleet.shape import DEFAULT, ClusterShape, FleetShape, ShapeError
from jobrelay.placement.workload import Taint

REPO = Path(__file__).resolve().parents[3]
ISSUE_EXAMPLE = """
clusters:
  worker-1: {nodes: 2, cpu: "8", memory: 32Gi}
  worker-2: {nodes: 4, cpu: "32", memory: 128Gi, labels: {region: west}}
  worker-gpu: {nodes: 1, cpu: "16", memory: 64Gi, gpu: 4, labels: {accelerator: h100},
               nodeLabels: {nvidia.com/gpu.product: H100}, taints: ["nvidia.com/gpu=present:NoSchedule"]}
"""


def parse(clusters: Any) -> FleetShape:
    return shape.parse({"clusters": clusters}, "fleet.yaml")


def test_the_issue_example_gives_three_workers_in_file_order_and_a_default_manager() -> None:
    fleet = shape.parse_yaml(ISSUE_EXAMPLE, "fleet.yaml")
    assert list(fleet.workers) == ["worker-1", "worker-2", "worker-gpu"]
    assert fleet.manager == DEFAULT
    assert fleet.workers["worker-2"] == ClusterShape(
        nodes=4, cpu="32", memory="128Gi", labels={"region": "west"}
    )
    assert fleet.workers["worker-gpu"] == ClusterShape(
        nodes=1, cpu="16", memory="64Gi", gpu=4, labels={"accelerator": "h100"},
        node_labels={"nvidia.com/gpu.product": "H100"},
        taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"),),
    )  # fmt: skip


def test_a_listed_manager_is_shaped_and_is_no_worker() -> None:
    fleet = parse({"manager": {"nodes": 1, "cpu": 4}, "worker-a": {}})
    assert fleet.manager == ClusterShape(nodes=1, cpu="4")
    assert list(fleet.workers) == ["worker-a"]
    assert list(fleet.clusters()) == ["manager", "worker-a"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, DEFAULT),
        ({"cpu": 8}, DEFAULT),  # a YAML number is a quantity too
        ({"cpu": 0.5, "memory": "512Mi"}, ClusterShape(cpu="0.5", memory="512Mi")),
        ({"cpu": "1500m"}, ClusterShape(cpu="1500m")),
        ({"nodes": 0}, ClusterShape(nodes=0)),
        ({"pods": 500}, ClusterShape(pods=500)),
        ({"extendedResources": {"example.com/fpga": 2}},
         ClusterShape(extended_resources={"example.com/fpga": 2})),
        ({"taints": ["dedicated:NoExecute", "spot=true:PreferNoSchedule"]},
         ClusterShape(taints=(Taint("dedicated", "", "NoExecute"),
                              Taint("spot", "true", "PreferNoSchedule")))),
        ({"nodeLabels": {"kubernetes.io/arch": "arm64"}},
         ClusterShape(node_labels={"kubernetes.io/arch": "arm64"})),
    ],
)  # fmt: skip
def test_fields_accepted(fields: dict[str, Any], expected: ClusterShape) -> None:
    assert parse({"worker-1": fields}).workers["worker-1"] == expected


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        ({"worker-1": {"cpus": 8}}, "cluster 'worker-1': field 'cpus': unknown field"),
        ({"worker-1": {"cpu": "eight"}}, "field 'cpu': 'eight' is not a Kubernetes quantity"),
        ({"worker-1": {"cpu": "0"}}, "field 'cpu': '0' must be more than zero"),
        ({"worker-1": {"memory": "-1Gi"}}, "field 'memory': '-1Gi' must be more than zero"),
        ({"worker-1": {"memory": "32GB"}}, "field 'memory': '32GB' is not a Kubernetes quantity"),
        ({"worker-1": {"cpu": True}}, "field 'cpu': True is not a Kubernetes quantity"),
        ({"worker-1": {"nodes": -1}}, "field 'nodes': -1 is out of range (from 0 to 1000)"),
        ({"worker-1": {"nodes": "2"}}, "field 'nodes': '2' is not a whole number"),
        ({"worker-1": {"nodes": True}}, "field 'nodes': True is not a whole number"),
        ({"worker-1": {"gpu": 1.5}}, "field 'gpu': 1.5 is not a whole number"),
        ({"worker-1": {"pods": 0}}, "field 'pods': 0 is out of range (at least 1)"),
        ({"worker-1": {"taints": ["gpu"]}}, "field 'taints': 'gpu' is not a taint"),
        ({"worker-1": {"taints": ["gpu=x:Sometimes"]}},
         "field 'taints': 'gpu=x:Sometimes': the effect must be one of NoSchedule"),
        ({"worker-1": {"taints": ["bad key=x:NoSchedule"]}},
         "field 'taints': 'bad key=x:NoSchedule': 'bad key' is not a valid taint key"),
        ({"worker-1": {"taints": ["k=a b:NoSchedule"]}}, "'a b' is not a valid taint value"),
        ({"worker-1": {"taints": ["k=a:NoSchedule", "k=b:NoSchedule"]}},
         "field 'taints': k:NoSchedule is listed twice"),
        ({"worker-1": {"taints": "k:NoSchedule"}}, "field 'taints': expected a list"),
        ({"worker-1": {"labels": {"region": 5}}},
         "field 'labels': the value of 'region' must be a string (quote 5)"),
        ({"worker-1": {"labels": {"-bad": "x"}}}, "field 'labels': '-bad' is not a valid label key"),
        ({"worker-1": {"labels": {"a": "not ok"}}}, "'not ok' is not a valid value for label 'a'"),
        ({"worker-1": {"labels": {"fleet.jobrelay.dev/local": "no"}}},
         "field 'labels': 'fleet.jobrelay.dev/local' is set by the fleet itself"),
        ({"worker-1": {"nodeLabels": {"type": "real"}}},
         "field 'nodeLabels': 'type' is set by the fleet itself"),
        ({"worker-1": {"extendedResources": {"fpga": 1}}},
         "field 'extendedResources': 'fpga' is not an extended resource name"),
        ({"worker-1": {"extendedResources": {"kubernetes.io/x": 1}}},
         "'kubernetes.io/x' is not an extended resource name"),
        ({"worker-1": {"extendedResources": {"nvidia.com/gpu": 1}}},
         "field 'extendedResources': 'nvidia.com/gpu' has a field of its own: use 'gpu'"),
        ({"worker-1": {"extendedResources": {"example.com/fpga": "2"}}},
         "the count of 'example.com/fpga' must be a whole number >= 0, not '2'"),
        ({"worker-1": [1, 2]}, "cluster 'worker-1': expected a mapping of nodes, cpu"),
        ({"Worker_1": {}}, "cluster name 'Worker_1' is not a DNS label"),
        ({"manager": {}}, "lists no worker cluster"),
        ({"manager": {"labels": {"a": "b"}}, "w": {}},
         "cluster 'manager': field 'labels': the manager is no WorkerCluster"),
        ({f"w{i}": {} for i in range(21)}, "lists 21 workers; at most 20"),
        ({}, "'clusters' must map cluster names to their shapes"),
    ],
)  # fmt: skip
def test_errors_name_the_file_the_cluster_and_the_field(clusters: Any, message: str) -> None:
    with pytest.raises(ShapeError) as raised:
        parse(clusters)
    assert str(raised.value).startswith("fleet.yaml: ")
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("clusters: {worker-1: {}}\nnodes: 3\n", "fleet.yaml: unknown key 'nodes'"),
        ("- worker-1\n", "fleet.yaml: expected a mapping with the key 'clusters'"),
        ("clusters: {w: {cpu: [}", "fleet.yaml: not valid YAML"),
        (
            "clusters:\n  w: {}\n  w: {nodes: 1}\n",
            "fleet.yaml: not valid YAML at line 3, column 3: duplicate key 'w'",
        ),
        (
            "clusters:\n  w: {nodes: 1, nodes: 2}\n",
            "fleet.yaml: not valid YAML at line 2, column 17: duplicate key 'nodes'",
        ),
    ],
)
def test_document_level_errors(text: str, message: str) -> None:
    with pytest.raises(ShapeError, match="^" + message.replace("(", r"\(")):
        shape.parse_yaml(text, "fleet.yaml")


def test_load_names_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ShapeError, match=f"^{tmp_path}/none.yaml: cannot read it"):
        shape.load(tmp_path / "none.yaml")


@pytest.mark.parametrize(
    "path",
    [REPO / "deploy" / "demo-fleet.yaml", REPO / "tests" / "e2e" / "shapes" / "placement.yaml"],
)
def test_shipped_shapes_parse(path: Path) -> None:
    fleet = shape.load(path)
    gpu = fleet.workers["worker-gpu"]
    assert (gpu.nodes, gpu.gpu, gpu.taints) == (
        1, 4, (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    )  # fmt: skip


def test_describe_says_nodes_resources_labels_and_taints() -> None:
    gpu = shape.parse_yaml(ISSUE_EXAMPLE, "x").workers["worker-gpu"]
    assert gpu.describe() == (
        "1 node x 16 CPU / 64Gi / 4 GPU; labels accelerator=h100; "
        "node labels nvidia.com/gpu.product=H100; taints nvidia.com/gpu=present:NoSchedule"
    )
    assert DEFAULT.describe() == "2 nodes x 8 CPU / 32Gi"


def test_node_manifest_carries_capacity_labels_and_taints() -> None:
    shaped = ClusterShape(
        nodes=1, cpu="16", memory="64Gi", gpu=4, pods=50,
        extended_resources={"example.com/fpga": 2},
        node_labels={"nvidia.com/gpu.product": "H100", "kubernetes.io/arch": "arm64"},
        taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"), Taint("spot", "", "NoExecute")),
    )  # fmt: skip
    manifest = nodes.node_manifest("worker-gpu", 1, shaped)
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "50", "nvidia.com/gpu": "4",
                "example.com/fpga": "2"}  # fmt: skip
    assert manifest["status"] == {"capacity": capacity, "allocatable": capacity}
    labels = manifest["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "H100"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels["type"] == "kwok"
    assert labels[nodes.FLEET_LABEL] == "worker-gpu"
    assert manifest["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "spot", "effect": "NoExecute"},
    ]


def test_an_untainted_node_has_no_spec() -> None:
    assert "spec" not in nodes.node_manifest("worker-1", 1, DEFAULT)


# --- a round trip: any valid shape, written as the file would be, parses back equal -----

_names = st.from_regex(r"[a-z]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_values = st.from_regex(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,8}[A-Za-z0-9])?)?", fullmatch=True)
_keys = st.builds(
    lambda prefix, name: f"{prefix}/{name}" if prefix else name,
    st.none() | st.sampled_from(["example.com", "nvidia.com", "a.b.c"]),
    st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,8}[A-Za-z0-9])?", fullmatch=True),
)
_label_maps = st.dictionaries(
    _keys.filter(lambda k: k not in shape.RESERVED_NODE_LABELS), _values, max_size=3
)
_taints = st.lists(
    st.builds(Taint, _keys, _values, st.sampled_from(shape.TAINT_EFFECTS)),
    max_size=3,
    unique_by=lambda t: (t.key, t.effect),
).map(tuple)
_cluster_shapes = st.builds(
    ClusterShape,
    nodes=st.integers(0, shape.MAX_NODES),
    cpu=st.sampled_from(["1", "8", "500m", "0.5", "96"]),
    memory=st.sampled_from(["1Gi", "32Gi", "512Mi", "1e9", "128Gi"]),
    gpu=st.integers(0, 16),
    pods=st.integers(1, 1000),
    extended_resources=st.dictionaries(
        st.sampled_from(["example.com/fpga", "acme.io/widget"]), st.integers(0, 8), max_size=2
    ),
    labels=_label_maps,
    node_labels=_label_maps,
    taints=_taints,
)


@given(
    workers=st.dictionaries(
        _names.filter(lambda n: n != shape.MANAGER), _cluster_shapes, min_size=1, max_size=4
    ),
    manager=_cluster_shapes.map(lambda s: ClusterShape(**{**s.__dict__, "labels": {}})),
)
def test_round_trip_through_yaml(workers: dict[str, ClusterShape], manager: ClusterShape) -> None:
    fleet = FleetShape(workers, manager)
    text = yaml.safe_dump(fleet.to_config())
    assert shape.parse_yaml(text, "x.yaml") == fleet
