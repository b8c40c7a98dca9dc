"""Resource: where a kind is served, the one type the kinds and the API client share."""

from __future__ import annotations

from jobrelay.vocabulary.resource import Resource


def test_a_resource_names_its_api_version_and_its_kind_flag_form() -> None:
    jobs = Resource("batch", "v1", "jobs", "Job")
    assert jobs.namespaced  # workload kinds are namespaced unless they say otherwise
    assert jobs.api_version == "batch/v1"
    assert jobs.name == "Job.v1.batch"
    pods = Resource("", "v1", "pods", "Pod")
    assert pods.api_version == "v1"
    assert pods.name == "Pod.v1"


def test_resources_compare_and_hash_by_value() -> None:
    nodes = Resource("", "v1", "nodes", "Node", namespaced=False)
    assert nodes == Resource("", "v1", "nodes", "Node", namespaced=False)
    assert nodes != Resource("", "v1", "nodes", "Node")
    assert len({nodes, Resource("", "v1", "nodes", "Node", namespaced=False)}) == 1
