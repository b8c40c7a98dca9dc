"""Issue 36: the management cache keeps a slim, shared Job (``managed_by``'s transform);
every decision made on it is the one made on the Job as the apiserver sent it."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.admission.workload_reads import Priorities, read_for_admission
from jobrelay.controller.kind_resolution import managed_by
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.mirrors import LAST_APPLIED_ANNOTATION
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

KIND = JobKind()
TRANSFORM = managed_by(KIND, DEFAULT_CONTROLLER_NAME)
NOW = "2026-03-01T12:10:00Z"

names = st.sampled_from(["a", "b", "train-1"])
quantities = st.sampled_from(["1", "500m", "2", "1Gi", "4Gi"])


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A Job as an apiserver sends it: generated labels and selector, managedFields and a
    ``kubectl apply`` record or not, various specs, statuses and annotations."""
    name = draw(names)
    uid = f"uid-{name}"
    keys = ["controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
            "batch.kubernetes.io/job-name"]  # fmt: skip
    chosen = keys if draw(st.booleans()) else draw(st.sets(st.sampled_from(keys)))
    generated = {k: name if "job-name" in k else uid for k in chosen}
    if draw(st.booleans()) and generated:  # a user's value in one of them
        generated[sorted(generated)[0]] = "mine"
    user_labels = draw(st.dictionaries(st.sampled_from(["app", "tier"]), names, max_size=2))
    annotations = draw(
        st.dictionaries(
            st.sampled_from(
                [LAST_APPLIED_ANNOTATION, "jobrelay.dev/clusters", "jobrelay.dev/redispatch", "n"]
            ),
            st.sampled_from(["w1", "w1,w2", "never", "{}"]),
            max_size=3,
        )
    )
    container = {
        "name": "main",
        "image": "trainer",
        "resources": {
            "requests": draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), quantities)),
            "limits": draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), quantities)),
        },
    }
    spec: dict[str, Any] = {
        "managedBy": DEFAULT_CONTROLLER_NAME,
        "parallelism": draw(st.integers(0, 4)),
        "suspend": draw(st.booleans()),
        "template": {
            "metadata": {"labels": {**user_labels, **generated}},
            "spec": {
                "containers": [container],
                **draw(st.sampled_from([{}, {"nodeSelector": {"pool": "gpu"}}])),
                **draw(st.sampled_from([{}, {"priorityClassName": "high"}])),
            },
        },
    }
    if draw(st.booleans()):
        spec["completions"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        spec["manualSelector"] = draw(st.booleans())
    if draw(st.booleans()):
        spec["backoffLimit"] = draw(st.integers(0, 6))
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": uid,
        "resourceVersion": "7",
        "creationTimestamp": "2026-03-01T12:00:00Z",
        "labels": {**user_labels, "jobrelay.dev/queue": "q"},
        "annotations": annotations,
    }
    if draw(st.booleans()):
        metadata["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    status = draw(
        st.sampled_from(
            [
                {},
                {"startTime": "2026-03-01T12:01:00Z", "active": 1},
                {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
            ]
        )
    )
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec,
            "status": status}  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(jobs(), jobs())
def test_every_decision_on_the_cached_job_is_the_one_on_the_job_as_sent(
    sent: dict[str, Any], other: dict[str, Any]
) -> None:
    before = copy.deepcopy(sent)
    cached = TRANSFORM(sent)
    assert cached is not None
    assert sent == before  # the object as sent is left alone
    made = {"controller_name": DEFAULT_CONTROLLER_NAME, "origin": "hq"}
    for run in (1, 2):
        assert KIND.build_mirror(cached, **made, run=run, now=NOW) == KIND.build_mirror(
            sent, **made, run=run, now=NOW
        )
    # A mirror of another Job (or of this one) patched the same way.
    for mirror in (KIND.build_mirror(other, **made), KIND.build_mirror(sent, **made)):
        assert KIND.spec_patch(cached, mirror) == KIND.spec_patch(sent, mirror)
        mirror_now = {**mirror, "status": other.get("status") or {}}
        assert KIND.next_status(cached, mirror_now, now=NOW) == KIND.next_status(
            sent, mirror_now, now=NOW
        )
    assert KIND.next_status(cached, None, now=NOW) == KIND.next_status(sent, None, now=NOW)
    assert KIND.finish(cached) == KIND.finish(sent)
    assert KIND.is_suspended(cached) == KIND.is_suspended(sent)
    assert KIND.pod_sets(cached) == KIND.pod_sets(sent)
    assert KIND.completions(cached) == KIND.completions(sent)
    key = WorkloadKey(KIND.name, "team-a/" + sent["metadata"]["name"])
    priorities = Priorities({"high": 100})
    assert read_for_admission(key, KIND, cached, priorities) == read_for_admission(
        key, KIND, sent, priorities
    )
    # Sent twice (a relist): the same sub-trees, shared.
    again = TRANSFORM(copy.deepcopy(before))
    assert again == cached
    assert again is not None and again["spec"] is cached["spec"]


def test_a_backlog_from_one_template_keeps_its_template_once() -> None:
    def sent(index: int) -> dict[str, Any]:
        uid = f"uid-{index}"
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"job-{index}",
                "namespace": "team-a",
                "uid": uid,
                "resourceVersion": str(index),
            },
            "spec": {
                "managedBy": DEFAULT_CONTROLLER_NAME,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                "template": {
                    "metadata": {
                        "labels": {
                            "app": "x",
                            "batch.kubernetes.io/controller-uid": uid,
                            "controller-uid": uid,
                            "batch.kubernetes.io/job-name": f"job-{index}",
                            "job-name": f"job-{index}",
                        }
                    },
                    "spec": {"containers": [{"name": "main", "image": "trainer"}]},
                },
            },
        }

    cached = [TRANSFORM(sent(index)) for index in range(3)]
    assert all(c is not None for c in cached)
    specs = {id(c["spec"]) for c in cached if c is not None}
    assert len(specs) == 1
    assert [c["metadata"]["name"] for c in cached if c is not None] == ["job-0", "job-1", "job-2"]


def test_the_probe_pods_of_jobs_from_one_template_are_alike() -> None:
    """The manager admission asks about alike probe pods once (controller/relay/admission.py):
    Jobs as an apiserver sends them differ in their generated labels, which the cache
    leaves out, so their probes are alike."""
    from bench.held_memory import job_object

    from jobrelay.controller.relay.admission import probe_digest
    from jobrelay.placement.admission_probes import probe_pods

    digests = set()
    for index in (1, 41, 81):  # one namespace (the bench's index % 40), one template
        cached = TRANSFORM(job_object(index, templates=20))
        assert cached is not None
        (probe,) = probe_pods(KIND.pod_templates(cached), "team-1")
        digests.add(probe_digest(probe))
    assert len(digests) == 1
