"""Every alert, judged by promtool on recorded scrapes of a healthy 2-replica install.

Two real `jobrelay run` replicas (leader election on: one leads, one stands by) relay
a few Jobs on the local fleet. Both replicas' /metrics are scraped in rounds, the
rounds become promtool input series (tests/promseries.py: the last round held for
20 minutes, as a state that persists), and `promtool test rules` asserts that no
alert of charts/jobrelay/files/prometheus-rules.yaml fires at any minute.

The last round is taken over a minute after the first Job was created: a standby
never drains its queue, so its oldest key is then over 60 s old, and with the
rules and metrics before issue 22 (a standby exposing its queue,
``max(jobrelay_workqueue_oldest_item_age_seconds) > 60``) JobrelayQueueBackingUp
fires here. That follows from the order of events, not from timing luck.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.promtool_binary import promtool as built_promtool
from tests.e2e.support import Relay, Replica
from tests.kubetools import eventually, job_manifest
from tests.promseries import input_series, samples_of

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "jobrelay" / "files" / "prometheus-rules.yaml"
JOBS = 4
# The standby's oldest queued key is older than JobrelayQueueBackingUp's 60 s by then.
LAST_ROUND_AFTER = 70.0
INTERVAL = "15s"
HOLD = 80  # intervals: 20 minutes, longer than every alert's window plus its `for:`


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return built_promtool(print, build=False)
    except BinaryError as error:
        pytest.fail(f"promtool is needed to judge the alerts: {error}")


async def scrape(replica: Replica) -> str:
    url = await eventually(
        lambda: _found(replica.metrics_url()), timeout=30, what="the metrics address"
    )
    async with httpx2.AsyncClient(timeout=10, trust_env=False) as http:
        answer = await http.get(url)
    assert answer.status_code == 200, answer.text
    return answer.text


async def _found(value: str | None) -> str | None:
    return value


def _alerts() -> list[str]:
    document = yaml.safe_load(RULES.read_text())
    return [rule["alert"] for group in document["groups"] for rule in group["rules"]]


def quiet_cases(rounds: list[dict[str, str]]) -> dict[str, Any]:
    """A promtool test file: the recording, and every alert quiet at every minute."""
    minutes = (len(rounds) + HOLD) * 15 // 60
    return {
        "rule_files": [str(RULES)],
        "evaluation_interval": INTERVAL,
        "tests": [
            {
                "name": "a healthy two-replica install, recorded",
                "interval": INTERVAL,
                "input_series": input_series(rounds, hold=HOLD),
                "alert_rule_test": [
                    {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": []}
                    for alert in _alerts()
                    for minute in range(minutes + 1)
                ],
                # The recording is what it should be: one leader, one queue (the leader's).
                "promql_expr_test": [
                    {
                        "expr": "sum(jobrelay_leader)",
                        "eval_time": "1m",
                        "exp_samples": [{"labels": "{}", "value": 1}],
                    },
                    {
                        "expr": "count(jobrelay_workqueue_depth)",
                        "eval_time": "1m",
                        "exp_samples": [{"labels": "{}", "value": 1}],
                    },
                ],
            }
        ],
    }


async def test_no_alert_fires_on_a_healthy_two_replica_install(
    replicas: dict[str, Replica],
    clients: dict[str, ApiClient],
    fleet: FleetHandle,
    namespace: str,
    promtool: Path,
    tmp_path: Path,
) -> None:
    a, b = replicas["a"], replicas["b"]
    manager = clients["manager"]
    await a.start(manager)
    leader = await a.wait_role("leader", timeout=60)
    await b.start(manager, clear_worker_status=False)
    await b.wait_role("standby", leader=leader["identity"], timeout=60)

    rounds: list[dict[str, str]] = []

    async def record() -> None:
        texts = await asyncio.gather(scrape(a), scrape(b))
        rounds.append({"leader:8080": texts[0], "standby:8080": texts[1]})

    await record()
    async with Relay(clients, fleet.workers, namespace, a) as relay:
        first_job = time.monotonic()
        names = [f"alerts-{index}" for index in range(JOBS)]
        for name in names:
            await relay.submit(
                job_manifest(name, annotations={"fleet.jobrelay.dev/duration": "1s"})
            )
        await record()
        await asyncio.gather(*(relay.verify(name) for name in names))
        await record()
        await asyncio.sleep(max(0.0, LAST_ROUND_AFTER - (time.monotonic() - first_job)))
        await record()

    for index, scrapes in enumerate(rounds):
        for instance, text in scrapes.items():
            (tmp_path / f"round-{index}-{instance.partition(':')[0]}.prom").write_text(text)
    cases = tmp_path / "recorded_test.yaml"
    cases.write_text(yaml.safe_dump(quiet_cases(rounds), sort_keys=False))
    done = await asyncio.to_thread(
        subprocess.run,
        [str(promtool), "test", "rules", str(cases)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, (
        f"an alert fires on a healthy install (recording in {tmp_path}):\n"
        + (done.stdout + done.stderr)[-6000:]
    )
    # The standby saw every Job's events and reconciled none of them: it says it stands by.
    standby = samples_of(rounds[-1]["standby:8080"], instance="standby", job="jobrelay")
    assert standby[("jobrelay_leader", (("instance", "standby"), ("job", "jobrelay")))] == 0
    assert not [name for name, _ in standby if name.startswith("jobrelay_workqueue_")]
