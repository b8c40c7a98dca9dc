"""An autoscaled worker's feed of jobrelay's ProvisioningRequests
(fleet/workers/provisioning_feed.py): what it keeps of a request, by workload key."""

from __future__ import annotations

from typing import Any

from jobrelay.fleet.workers.provisioning_feed import ProvisioningFeed, slim_request
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.vocabulary import provisioning_api as api

TAG = "Job.v1.batch:team-a/train"


def request(name: str, tag: str = TAG, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team-a", "name": name, "uid": "r-1", "resourceVersion": "3",
            "labels": {api.PROVISIONING_FOR_LABEL: "uid-1", "other": "x"},
            "annotations": {api.PROVISIONING_WORKLOAD_ANNOTATION: tag, "big": "y" * 100},
            "managedFields": [{"manager": "x"}],
        },
        "spec": {"provisioningClassName": api.CHECK_CAPACITY,
                 "podSets": [{"podTemplateRef": {"name": f"{name}-0"}, "count": 2}]},
        "status": status,
    }  # fmt: skip


def event(name: str, tag: str = TAG, *, gone: bool = False) -> InformerEvent:
    new = None if gone else slim_request(request(name, tag))
    return InformerEvent(Change.DELETED if gone else Change.UPDATED, f"team-a/{name}", None, new)


def test_a_request_is_kept_slim_with_what_a_decision_reads() -> None:
    conditions = [{"type": "Provisioned", "status": "True"}]
    slim = slim_request(request("jobrelay-uid-1", conditions=conditions))
    assert slim["metadata"]["labels"] == {api.PROVISIONING_FOR_LABEL: "uid-1"}
    assert slim["metadata"]["annotations"] == {api.PROVISIONING_WORKLOAD_ANNOTATION: TAG}
    assert slim["spec"]["podSets"] == [{"podTemplateRef": {"name": "jobrelay-uid-1-0"}}]
    assert slim["status"] == {"conditions": conditions}
    assert slim_request({"metadata": {"name": "x"}, "spec": "bad", "status": None})["spec"] == {
        "provisioningClassName": "",
        "podSets": [],
    }


def test_requests_are_found_by_their_workload_and_counted() -> None:
    feed = ProvisioningFeed("w1", enabled=True)
    assert feed._apply(event("a"))
    assert feed._apply(event("b", "Job.v1.batch:team-a/other"))
    assert [r["metadata"]["name"] for r in feed.of(TAG)] == ["a"]
    assert feed.open_requests == 2
    assert sorted(feed.workload_keys()) == ["Job.v1.batch:team-a/other", TAG]
    feed._apply(event("a", gone=True))
    assert feed.of(TAG) == [] and feed.open_requests == 1 and TAG not in feed.workload_keys()


def test_a_worker_that_does_not_grow_watches_nothing() -> None:
    feed = ProvisioningFeed("w1")
    assert feed.informers() == () and not feed.listed
