"""`jobrelay get` shows each workload's RelayQueue and, while it waits, its position there,
counted as the controller's admission pass orders the queue."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
import yaml
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import FakeApiserver
from tests.unit.controller.fakes import status_body

from jobrelay.cli import get as get_cli
from jobrelay.cli.main import cli
from jobrelay.relayapi.pending_rules import match_pending_route as pending_namespace

JOBS = "batch/v1/jobs"
QUEUES = "jobrelay.dev/v1alpha1/relayqueues"
NAMESPACES = "v1/namespaces"
PRIORITY_CLASSES = "scheduling.k8s.io/v1/priorityclasses"
MANAGED = "jobrelay.dev/relay"


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    fake.lead()  # a controller leads: no warning on stderr
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    return fake


def put_job(
    manager: FakeApiserver,
    name: str,
    *,
    namespace: str = "team-a",
    created: int = 0,
    queue: str | None = None,
    priority_class: str | None = None,
    placed: str | None = None,
    suspended: bool = False,
    done: bool = False,
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    status: dict[str, Any] = {}
    if done:
        status = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    return manager.put(JOBS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": {"jobrelay.dev/queue": queue} if queue else {},
            "annotations": {"jobrelay.dev/cluster": placed} if placed else {},
            "creationTimestamp": f"2026-01-02T03:00:{created:02d}Z",
        },
        "spec": {"managedBy": MANAGED, "suspend": suspended, "template": {"spec": pod_spec}},
        "status": status,
    })  # fmt: skip


def put_queue(manager: FakeApiserver, name: str, selector: dict[str, str] | None = None) -> None:
    spec: dict[str, Any] = {"weight": 1}
    if selector is not None:
        spec["namespaceSelector"] = {"matchLabels": selector}
    manager.put(QUEUES, {"apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue",
                         "metadata": {"name": name}, "spec": spec})  # fmt: skip


def put_namespace(manager: FakeApiserver, name: str, labels: dict[str, str]) -> None:
    manager.put(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": name, "labels": labels}})  # fmt: skip


def put_priority_class(manager: FakeApiserver, name: str, value: int) -> None:
    manager.put(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": name}, "value": value})  # fmt: skip


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["get", *args])


def columns(result: Result) -> dict[str, tuple[str, str]]:
    """NAME -> (QUEUE, POSITION) of a table."""
    assert result.exit_code == 0, result.output
    header, *lines = result.output.splitlines()
    names = header.split()
    queue, position = names.index("QUEUE"), names.index("POSITION")
    assert position == queue + 1
    return {line.split()[1]: (line.split()[queue], line.split()[position]) for line in lines}


def test_positions_follow_priority_then_age(manager: FakeApiserver) -> None:
    put_queue(manager, "q")
    put_priority_class(manager, "urgent", 1000)
    put_job(manager, "old", queue="q", created=1)
    put_job(manager, "newer", queue="q", created=2)
    put_job(manager, "urgent-last", queue="q", created=9, priority_class="urgent")
    put_job(manager, "running", queue="q", created=0, placed="worker-1")
    put_job(manager, "finished", queue="q", created=0, done=True)
    put_job(manager, "paused", queue="q", created=0, suspended=True)
    put_job(manager, "unlabelled", created=5)  # q's selector {} takes every namespace
    result = invoke("-n", "team-a")
    header = result.output.splitlines()[0].split()
    assert header[-3:] == ["QUEUE", "POSITION", "REASON"]
    assert columns(result) == {
        "urgent-last": ("q", "1"), "old": ("q", "2"), "newer": ("q", "3"),
        "unlabelled": ("q", "4"), "running": ("q", "-"), "finished": ("q", "-"),
        "paused": ("q", "-"),
    }  # fmt: skip


def test_without_queues_the_table_is_as_before_and_nothing_more_is_read(
    manager: FakeApiserver,
) -> None:
    put_job(manager, "plain")
    result = invoke("-n", "team-a")
    assert result.exit_code == 0, result.output
    assert "QUEUE" not in result.output.splitlines()[0]
    lists = [path for method, path, _, _ in manager.requests if method == "GET"]
    assert not any(p.rsplit("/", 1)[-1] == "namespaces" or "priorityclasses" in p for p in lists)


def test_one_list_of_each_and_waiting_ones_in_other_namespaces_count(
    manager: FakeApiserver,
) -> None:
    put_queue(manager, "shared")
    put_job(manager, "theirs", namespace="team-b", queue="shared", created=1)
    put_job(manager, "mine", queue="shared", created=2)
    put_job(manager, "mine-too", queue="shared", created=3)
    assert columns(invoke("-n", "team-a")) == {"mine": ("shared", "2"), "mine-too": ("shared", "3")}
    gets = [path for method, path, _, _ in manager.requests if method == "GET"]
    assert gets.count("/api/v1/namespaces") == 1
    assert gets.count("/apis/scheduling.k8s.io/v1/priorityclasses") == 1
    assert gets.count("/apis/batch/v1/jobs") == 1  # across namespaces, once, to count
    assert all("/jobs/" not in path for path in gets)  # no read per workload


def test_a_namespace_selector_places_unlabelled_workloads(manager: FakeApiserver) -> None:
    put_queue(manager, "team-a-queue", {"team": "a"})
    put_queue(manager, "zz-catch-all", {})
    put_namespace(manager, "team-a", {"team": "a"})
    put_namespace(manager, "team-b", {})
    put_job(manager, "a1", created=1)
    put_job(manager, "b1", namespace="team-b", created=2)
    put_job(manager, "b2", namespace="team-b", created=3)
    assert columns(invoke("-A")) == {
        "a1": ("team-a-queue", "1"), "b1": ("zz-catch-all", "1"), "b2": ("zz-catch-all", "2"),
    }  # fmt: skip


def test_namespaces_not_readable_the_label_alone_names_the_queue(manager: FakeApiserver) -> None:
    put_queue(manager, "team-a-queue", {"team": "a"})
    put_namespace(manager, "team-a", {"team": "a"})
    put_job(manager, "unlabelled", created=1)
    put_job(manager, "labelled", queue="team-a-queue", created=2)
    manager.forbidden = {"namespaces"}
    result = invoke("jobs", "-A")
    assert columns(result) == {"unlabelled": ("-", "-"), "labelled": ("team-a-queue", "1")}
    assert "Forbidden" not in result.output


def test_priority_classes_not_readable_every_priority_is_0(manager: FakeApiserver) -> None:
    put_queue(manager, "q")
    put_priority_class(manager, "urgent", 1000)
    put_job(manager, "old", queue="q", created=1)
    put_job(manager, "urgent-last", queue="q", created=9, priority_class="urgent")
    manager.forbidden = {"priorityclasses"}
    assert columns(invoke("-A")) == {"old": ("q", "1"), "urgent-last": ("q", "2")}


def test_queues_not_readable_the_label_names_the_queue(manager: FakeApiserver) -> None:
    put_job(manager, "b", queue="q", created=2)
    put_job(manager, "a", queue="q", created=1)
    manager.forbidden = {"relayqueues"}
    assert columns(invoke("-A")) == {"a": ("q", "1"), "b": ("q", "2")}


def test_a_label_naming_no_queue_takes_no_place(manager: FakeApiserver) -> None:
    put_queue(manager, "q")
    put_job(manager, "lost", queue="nope")
    put_job(manager, "queued", queue="q")
    assert columns(invoke("-A")) == {"lost": ("nope", "-"), "queued": ("q", "1")}


def test_wide_has_queue_and_position_before_the_placements(manager: FakeApiserver) -> None:
    put_queue(manager, "q")
    put_job(manager, "a", queue="q")
    result = invoke("-A", "-o", "wide")
    assert result.output.splitlines()[0].split()[8:] == [
        "QUEUE", "POSITION", "PLACEMENTS", "ACTIVE", "FAILED", "ESTIMATED", "START", "REASON",
    ]  # fmt: skip
    assert columns(result) == {"a": ("q", "1")}


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_json_and_yaml_carry_the_queue_and_position_as_annotations(
    manager: FakeApiserver, output: str
) -> None:
    put_queue(manager, "q", {"team": "a"})
    put_namespace(manager, "team-a", {"team": "a"})
    put_job(manager, "b", queue="q", created=2)
    put_job(manager, "a", queue="q", created=1)
    put_job(manager, "running", queue="q", placed="worker-1")
    stored = put_job(manager, "plain", namespace="other")
    result = invoke("-A", "-o", output)
    assert result.exit_code == 0, result.output
    document = json.loads(result.output) if output == "json" else yaml.safe_load(result.output)
    annotations = {
        item["metadata"]["name"]: {
            k: v for k, v in item["metadata"]["annotations"].items() if k.startswith("jobrelay.dev/queue")
        }
        for item in document["items"]
    }  # fmt: skip
    assert annotations == {
        "a": {"jobrelay.dev/queue-name": "q", "jobrelay.dev/queue-position": "1"},
        "b": {"jobrelay.dev/queue-name": "q", "jobrelay.dev/queue-position": "2"},
        "running": {"jobrelay.dev/queue-name": "q"},
        "plain": {},
    }
    assert stored in document["items"]  # a workload in no queue is printed as stored


def test_jsonpath_reads_the_position(manager: FakeApiserver) -> None:
    put_queue(manager, "q")
    put_job(manager, "a", queue="q")
    result = invoke(
        "job", "a", "-n", "team-a",
        "-o", "jsonpath={.metadata.annotations.jobrelay\\.dev/queue-position}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output == "1"


def test_a_watch_counts_positions_again_as_workloads_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from datetime import UTC, datetime

    from jobrelay.admission.queue_model import QueueSpec
    from jobrelay.admission.queue_places import QueueKnowledge
    from jobrelay.cli.get import JOB_KIND, Printer
    from jobrelay.cli.queue_positions import QueueView

    def job(name: str, created: int, placed: str = "") -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": "ns", "labels": {"jobrelay.dev/queue": "q"},
                         "annotations": {"jobrelay.dev/cluster": placed} if placed else {},
                         "creationTimestamp": f"2026-01-02T03:00:{created:02d}Z"},
            "spec": {"managedBy": MANAGED},
        }  # fmt: skip

    first, second = job("first", 1), job("second", 2)
    view = QueueView(
        QueueKnowledge({"q": QueueSpec("q")}, {"ns": {}}), lambda _kind, _obj: True,
        {(JOB_KIND.name, "ns", "first"): (JOB_KIND, first),
         (JOB_KIND.name, "ns", "second"): (JOB_KIND, second)},
        shown=True,
    )  # fmt: skip
    printer = Printer(None, now=lambda: datetime(2026, 1, 2, 3, 5, tzinfo=UTC))
    printer.queue_view = view
    printer.first([(JOB_KIND, first), (JOB_KIND, second)], single=False)
    printer.changed(JOB_KIND, job("first", 1, placed="worker-1"))  # admitted: takes no place
    printer.changed(JOB_KIND, dict(second))  # the same object: its position moved up
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    at = header.index("POSITION")
    assert [(line.split()[1], line.split()[at]) for line in lines[1:]] == [
        ("first", "1"), ("second", "2"), ("first", "-"), ("second", "1"),
    ]  # fmt: skip


def test_workloads_not_listable_across_namespaces_count_what_was_listed(
    manager: FakeApiserver,
) -> None:
    put_queue(manager, "shared")
    put_job(manager, "theirs", namespace="team-b", queue="shared", created=1)
    put_job(manager, "mine", queue="shared", created=2)
    manager.forbidden_across = {"jobs", "jobsets"}
    result = invoke("-n", "team-a")
    assert columns(result) == {"mine": ("shared", "1")}  # theirs is not the tenant's to see
    assert "Forbidden" not in result.output


class ServingApiserver(FakeApiserver):
    """A manager whose controller's aggregated API answers pendingworkloads."""

    pending: dict[str, list[dict[str, Any]]]

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        namespace = pending_namespace(path)
        if namespace is None:
            return await super().__call__(request)
        self.requests.append((request.method, path, {}, None))
        if namespace not in self.pending:
            return httpx2.Response(403, json=status_body(403, "Forbidden", "you may not"))
        items = self.pending[namespace]
        return httpx2.Response(200, json={"planned": True, "truncated": False, "items": items})


def test_the_controllers_positions_when_its_api_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ServingApiserver("manager")
    fake.lead()
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    # The tenant may not read RelayQueues; two Jobs of another namespace wait ahead.
    fake.forbidden = {"relayqueues"}
    put_job(fake, "mine", queue="shared", created=5)
    put_job(fake, "running", queue="shared", created=0, placed="worker-1")
    fake.pending = {"team-a": [
        {"kind": "Job", "name": "mine", "queue": "shared", "position": 3, "aheadNotShown": 2},
    ]}  # fmt: skip
    result = invoke("-n", "team-a")
    assert result.exit_code == 0, result.output
    assert columns(result) == {"mine": ("shared", "3"), "running": ("shared", "-")}
    gets = [path for method, path, _, _ in fake.requests if method == "GET"]
    assert "/apis/batch/v1/jobs" not in gets  # no count across namespaces


def test_counted_here_when_the_api_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ServingApiserver("manager")
    fake.lead()
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    fake.pending = {}
    put_queue(fake, "shared")
    put_job(fake, "theirs", namespace="team-b", queue="shared", created=1)
    put_job(fake, "mine", queue="shared", created=2)
    assert columns(invoke("-n", "team-a")) == {"mine": ("shared", "2")}
    gets = [path for method, path, _, _ in fake.requests if method == "GET"]
    assert "/apis/api.jobrelay.dev/v1alpha1/namespaces/team-a/pendingworkloads" in gets
