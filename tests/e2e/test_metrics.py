"""/metrics adds up to what happened: 100 relayed Jobs, scraped while they run and after.

The controller serves /metrics, /healthz and /readyz on ``--metrics-address
127.0.0.1:0`` (ControllerProcess's default: a free loopback port, found in its
log). Counters are read as differences from a scrape taken before the Jobs are
created, so the module's controller may have done other work before.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobrelay.kube.client import ApiClient
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION
from tests.e2e.support import Relay
from tests.kubetools import eventually, job_manifest, refuse_jobs

pytestmark = pytest.mark.e2e

JOBS = 100
FAILING = 10  # every tenth Job fails, so both outcomes are counted
FAIL = {"fleet.jobrelay.dev/outcome": "fail"}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(url: str) -> Samples:
    async with httpx2.AsyncClient(timeout=10, trust_env=False) as http:
        answer = await http.get(url)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): float(sample.value)
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over every series whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def by(samples: Samples, name: str, *keys: str) -> Mapping[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = collections.defaultdict(float)
    for (n, labels), value in samples.items():
        if n == name:
            as_dict = dict(labels)
            out[tuple(as_dict.get(k, "") for k in keys)] += value
    return out


COUNTERS = (
    "jobrelay_dispatched_total",
    "jobrelay_finished_total",
    "jobrelay_dispatch_latency_seconds_count",
    "jobrelay_status_copy_latency_seconds_count",
    "jobrelay_status_update_latency_seconds_count",
    "jobrelay_apiserver_requests_total",
)


async def test_counters_and_histograms_add_up_over_100_jobs(relay: Relay) -> None:
    url = await eventually(
        lambda: _found(relay.controller.metrics_url()), timeout=30, what="the metrics address"
    )
    before = await scrape(url)
    base = url.removesuffix("/metrics")
    async with httpx2.AsyncClient(timeout=10, trust_env=False) as http:
        assert (await http.get(f"{base}/healthz")).status_code == 200
        assert (await http.get(f"{base}/readyz")).status_code == 200

    names = [f"m-{i:03d}" for i in range(JOBS)]
    await asyncio.gather(
        *(
            relay.submit(
                job_manifest(name, backoff_limit=0, annotations=FAIL if i % 10 == 9 else None)
            )
            for i, name in enumerate(names)
        )
    )

    # Scraped while the Jobs run: counters never go down, nothing finishes undispatched.
    last = before

    async def all_finished() -> list[dict[str, Any]] | None:
        nonlocal last
        now = await scrape(url)
        for name in COUNTERS:
            assert total(now, name) >= total(last, name), f"{name} went down"
        dispatched = total(now, "jobrelay_dispatched_total") - total(
            before, "jobrelay_dispatched_total"
        )
        finished = total(now, "jobrelay_finished_total") - total(before, "jobrelay_finished_total")
        assert finished <= dispatched
        last = now
        jobs = (await relay.manager.list(relay.resource, namespace=relay.namespace)).items
        done = [job for job in jobs if _outcome(job)]
        return jobs if len(done) == JOBS else None

    jobs = await eventually(all_finished, timeout=300, interval=1.0, what=f"{JOBS} Jobs finished")

    # What happened, as the apiserver shows it.
    happened: collections.Counter[tuple[str, str]] = collections.Counter()
    for job in jobs:
        cluster = job["metadata"]["annotations"][CLUSTER_ANNOTATION]
        happened[(cluster, "succeeded" if _outcome(job) == "Complete" else "failed")] += 1
    assert sum(n for (_, outcome), n in happened.items() if outcome == "failed") == FAILING

    async def counted() -> Samples | None:
        # The final status write is counted right after it; a scrape may just precede it.
        after = await scrape(url)
        finished = total(after, "jobrelay_finished_total") - total(
            before, "jobrelay_finished_total"
        )
        return after if finished >= JOBS else None

    after = await eventually(counted, timeout=30, what="every finished Job counted")

    def delta(name: str, *keys: str) -> dict[tuple[str, ...], float]:
        now, then = by(after, name, *keys), by(before, name, *keys)
        return {k: v - then.get(k, 0.0) for k, v in now.items() if v - then.get(k, 0.0)}

    assert delta("jobrelay_dispatched_total") == {(): JOBS}
    assert delta("jobrelay_redispatched_total") == {}
    assert delta("jobrelay_finished_total", "worker", "outcome") == dict(happened)
    assert delta("jobrelay_finished_total", "kind") == {("Job.v1.batch",): JOBS}
    dispatched_by_cluster = delta("jobrelay_dispatched_total", "worker")
    assert dispatched_by_cluster == dict(
        collections.Counter((c,) for c, _ in happened.elements())
    ), "mirrors created per cluster differ from where the Jobs ran"

    # One dispatch latency and one finishing status copy per Job; at least one status
    # update per Job (each ran and ended).
    assert delta("jobrelay_dispatch_latency_seconds_count") == {(): JOBS}
    assert delta("jobrelay_dispatch_latency_seconds_bucket", "le")[("+Inf",)] == JOBS
    assert delta("jobrelay_dispatch_latency_seconds_sum")[()] > 0
    # Split: the wait for capacity (none here: the fleet has room) and the mirror creation.
    assert delta("jobrelay_capacity_wait_seconds_count", "kind") == {("Job.v1.batch",): JOBS}
    assert delta("jobrelay_mirror_creation_seconds_count", "kind") == {("Job.v1.batch",): JOBS}
    assert delta("jobrelay_status_copy_latency_seconds_count") == {(): JOBS}
    assert delta("jobrelay_status_copy_latency_seconds_bucket", "le")[("+Inf",)] == JOBS
    copies = delta("jobrelay_status_update_latency_seconds_count")[()]
    assert copies >= JOBS
    assert delta("jobrelay_status_update_latency_seconds_bucket", "le")[("+Inf",)] == copies

    # Every mirror creation was a create request on a worker; status writes patched the manager.
    creates = delta("jobrelay_apiserver_requests_total", "worker", "verb", "code")
    for cluster, n in dispatched_by_cluster.items():
        assert creates.get((cluster[0], "create", "201"), 0) >= n
    assert creates.get(("", "patch", "200"), 0) >= JOBS + copies  # worker="": the manager
    assert total(after, "jobrelay_apiserver_request_duration_seconds_count") > 0
    assert total(after, "jobrelay_reconcile_duration_seconds_count", result="done") > 0

    # The state gauges: leading, synced, every worker connected, the queue drained.
    assert total(after, "jobrelay_leader") == 1
    assert total(after, "jobrelay_ready") == 1
    for worker in relay.workers:
        assert total(after, "jobrelay_worker_connected", worker=worker) == 1
        assert total(after, "jobrelay_worker_lost", worker=worker) == 0
        assert total(after, "jobrelay_worker_allocatable", worker=worker, resource="cpu") > 0
    assert ("jobrelay_workqueue_depth", frozenset()) in after
    assert ("jobrelay_workqueue_oldest_item_age_seconds", frozenset()) in after
    assert total(after, "jobrelay_held_workloads") == 0
    assert total(after, "jobrelay_workloads", kind="Job.v1.batch") >= JOBS
    assert total(after, "jobrelay_build_info") == 1
    assert total(after, "process_resident_memory_bytes") > 0


async def test_a_mirror_every_worker_rejects_is_counted_as_a_terminal_reconcile(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    """A problem only the user can fix (here: a quota of no Jobs on every worker) shows
    in the reconcile metrics as what it is, not as done or requeue."""
    url = await eventually(
        lambda: _found(relay.controller.metrics_url()), timeout=30, what="the metrics address"
    )
    for worker in relay.workers:
        await refuse_jobs(clients[worker], relay.namespace)
    before = await scrape(url)
    terminal = {"result": "terminal"}

    created = await relay.submit(job_manifest("rejected"))
    await relay.wait_event(
        created["metadata"]["uid"],
        lambda event: event.get("type") == "Warning" and event.get("reason") == "MirrorRejected",
        what="a MirrorRejected Warning Event on the management Job",
    )

    async def counted() -> Samples | None:
        # The reconcile is counted as it returns, right after its Event is queued.
        after = await scrape(url)
        name = "jobrelay_reconcile_duration_seconds_count"
        return after if total(after, name, **terminal) > total(before, name, **terminal) else None

    after = await eventually(counted, timeout=30, what="a terminal reconcile counted")
    assert total(after, "jobrelay_reconcile_duration_seconds_count", kind="Job.v1.batch",
                 **terminal) > 0  # fmt: skip
    assert relay.mirror_uids(created["metadata"]["uid"]) == set()
    relay.controller.assert_alive()


async def _found(url: str | None) -> str | None:
    return url


def _outcome(job: Mapping[str, Any]) -> str | None:
    status = job.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None
