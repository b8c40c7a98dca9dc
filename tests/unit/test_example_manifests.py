"""examples/: every file parses, is a manifest a tenant applies unchanged, and is applied
by tests/e2e/test_examples.py (a new file not in its ``EXAMPLES`` fails here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.e2e.test_examples import EXAMPLES, EXAMPLES_DIR

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_KINDS = {"Job", "JobSet", "RayJob", "RayCluster", "TrainJob", "PyTorchJob", "MPIJob"}
FILES = sorted(path.name for path in EXAMPLES_DIR.glob("*.y*ml"))


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((EXAMPLES_DIR / name).read_text()) if doc]


def has_managed_by(doc: dict[str, Any]) -> bool:
    spec = doc.get("spec") or {}
    return "managedBy" in spec or "managedBy" in (spec.get("runPolicy") or {})


def test_every_example_is_applied_by_the_e2e_test() -> None:
    assert sorted(EXAMPLES) == FILES, "add the file to EXAMPLES in tests/e2e/test_examples.py"


@pytest.mark.parametrize("name", FILES)
def test_an_example_is_a_manifest_for_any_namespace(name: str) -> None:
    docs = documents(name)
    assert docs, name
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), doc
        assert doc["metadata"]["name"], doc
        assert "namespace" not in doc["metadata"], "applied with -n: no namespace of its own"
    workloads = [
        (doc["kind"], doc["metadata"]["name"]) for doc in docs if doc["kind"] in WORKLOAD_KINDS
    ]
    assert workloads == [(kind, workload) for kind, workload, _ in EXAMPLES[name]]
    # Submitted unchanged: the webhook sets managedBy (examples/README.md), but for the
    # README's first Job, applied before any namespace is enabled.
    assert any(has_managed_by(doc) for doc in docs) == (name == "hello.yaml"), name


def test_one_example_per_kind_the_issue_names() -> None:
    docs = {name: documents(name) for name in FILES}
    kinds = {doc["kind"] for found in docs.values() for doc in found}
    assert WORKLOAD_KINDS | {"RelayQueue", "ConfigMap", "Secret"} <= kinds
    jobs = [doc for found in docs.values() for doc in found if doc["kind"] == "Job"]
    assert any(job["spec"].get("completionMode") == "Indexed" for job in jobs)
    pods = [job["spec"]["template"]["spec"] for job in jobs]
    volumes = [volume for pod in pods for volume in pod.get("volumes") or []]
    assert any("persistentVolumeClaim" in volume for volume in volumes)
    assert any("configMap" in volume for volume in volumes)
    env = [e for pod in pods for c in pod["containers"] for e in c.get("env") or []]
    assert any("secretKeyRef" in (e.get("valueFrom") or {}) for e in env)


def test_the_examples_are_documented() -> None:
    readme = (EXAMPLES_DIR / "README.md").read_text()
    for name in FILES:
        assert f"`{name}`" in readme, name
    assert "examples/" in (ROOT / "docs" / "usage.md").read_text()
