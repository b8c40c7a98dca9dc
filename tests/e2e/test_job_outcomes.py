"""Relayed Jobs end as the worker ran them: every outcome of the batch/v1 Job API.

Each test creates one managed Job on the manager and checks (``Relay.verify``)
that it is placed on a worker, mirrored there once, and that the management
Job's final status is the mirror's: counters, conditions with reasons,
indexes, start and completion time. The default mode deletes finished mirrors,
so verify also waits for that.
"""

from __future__ import annotations

import pytest

from jobrelay.kube.resources import PODS
from tests.e2e.support import Relay
from tests.kubetools import condition, is_true, job_manifest

pytestmark = pytest.mark.e2e

FAIL = {"fleet.jobrelay.dev/outcome": "fail"}


async def test_succeeding_job_is_dispatched_and_reports_complete(relay: Relay) -> None:
    created = await relay.submit(
        job_manifest("hello", annotations={"fleet.jobrelay.dev/duration": "1s"})
    )
    done = await relay.verify("hello", outcome="Complete", reason="CompletionsReached")
    assert done.job["metadata"]["uid"] == created["metadata"]["uid"]
    assert done.job["status"]["succeeded"] == 1
    assert is_true(done.job, "SuccessCriteriaMet")
    pods = await relay.manager.list(PODS, namespace=relay.namespace)
    assert pods.items == [], "pods of a relayed Job ran on the manager"


async def test_parallel_completions_are_copied_live(relay: Relay) -> None:
    await relay.submit(
        job_manifest(
            "six", completions=6, parallelism=3, annotations={"fleet.jobrelay.dev/duration": "2s"}
        )
    )
    done = await relay.verify("six", outcome="Complete")
    assert done.job["status"]["succeeded"] == 6
    assert done.job["status"].get("failed", 0) == 0
    # Live: while it ran, the management Job showed running pods, never more than parallelism.
    actives = [(v.get("status") or {}).get("active", 0) for v in relay.jobs.versions(done.uid)]
    assert max(actives) > 0, f"the management Job never showed active pods: {actives}"
    assert max(actives) <= 3, actives


async def test_backoff_limit_exceeded_fails_the_job(relay: Relay) -> None:
    await relay.submit(job_manifest("doomed", backoff_limit=2, annotations=FAIL))
    done = await relay.verify("doomed", outcome="Failed", reason="BackoffLimitExceeded")
    assert done.job["status"]["failed"] == 3
    assert done.job["status"].get("succeeded", 0) == 0
    assert is_true(done.job, "FailureTarget")
    assert not done.job["status"].get("completionTime")


async def test_indexed_job_reports_completed_indexes(relay: Relay) -> None:
    await relay.submit(
        job_manifest("indexed", completions=5, parallelism=5, completionMode="Indexed")
    )
    done = await relay.verify("indexed", outcome="Complete")
    assert done.job["status"]["completedIndexes"] == "0-4"
    assert done.job["status"]["succeeded"] == 5


async def test_backoff_limit_per_index_reports_failed_indexes(relay: Relay) -> None:
    # KWOK annotations are per pod template, so every index fails: each gets one retry.
    await relay.submit(
        job_manifest(
            "per-index",
            completions=3,
            parallelism=3,
            backoff_limit=100,
            completionMode="Indexed",
            backoffLimitPerIndex=1,
            annotations=FAIL,
        )
    )
    done = await relay.verify("per-index", outcome="Failed", reason="FailedIndexes")
    assert done.job["status"]["failedIndexes"] == "0-2"
    assert done.job["status"]["failed"] == 6
    assert not done.job["status"].get("completedIndexes")


async def test_success_policy_completes_with_reason_success_policy(relay: Relay) -> None:
    await relay.submit(
        job_manifest(
            "policy",
            completions=3,
            parallelism=3,
            completionMode="Indexed",
            successPolicy={"rules": [{"succeededIndexes": "0"}]},
        )
    )
    done = await relay.verify("policy", outcome="Complete", reason="SuccessPolicy")
    met = condition(done.job, "SuccessCriteriaMet") or {}
    assert met.get("status") == "True" and met.get("reason") == "SuccessPolicy", met
    assert done.job["status"]["succeeded"] >= 1


async def test_pod_failure_policy_fails_the_job_on_exit_code(relay: Relay) -> None:
    await relay.submit(
        job_manifest(
            "exit42",
            backoff_limit=5,
            annotations={**FAIL, "fleet.jobrelay.dev/exit-code": "42"},
            podFailurePolicy={
                "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
            },
        )
    )
    done = await relay.verify("exit42", outcome="Failed", reason="PodFailurePolicy")
    assert done.job["status"]["failed"] == 1
