"""`jobrelay queues`: the RelayQueues' figures as the controller wrote them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.cli.fakes import FakeApiserver

from jobrelay.cli import queues as queues_cli
from jobrelay.cli.main import cli
from jobrelay.cli.queues import queue_rows

QUEUES_PATH = "jobrelay.dev/v1alpha1/relayqueues"


def relay_queue(name: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> Any:
    obj: dict[str, Any] = {"apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue",
                           "metadata": {"name": name}, "spec": spec}  # fmt: skip
    if status is not None:
        obj["status"] = status
    return obj


TEAM_A = relay_queue(
    "team-a",
    {"weight": 1, "nominalQuota": {"cpu": "32", "memory": "128Gi"}, "borrowingLimit": {"cpu": "0"}},
    {"pending": 12, "admitted": 32, "usage": {"cpu": "32", "memory": "64Gi"},
     "fairShare": 0.25, "actualShare": 0.2504,
     "conditions": [{"type": "Valid", "status": "True", "reason": "Valid"}]},
)  # fmt: skip
TEAM_B = relay_queue(
    "team-b",
    {"weight": 2, "queueingStrategy": "StrictFIFO", "preemption": {"reclaimWithinFleet": "Any"}},
    {"pending": 0, "admitted": 3, "usage": {"cpu": "1500m", "nvidia.com/gpu": "2"},
     "fairShare": 0.5, "actualShare": 0.125},
)  # fmt: skip
BROKEN = relay_queue(
    "broken",
    {"weight": 0},
    {"conditions": [{"type": "Valid", "status": "False", "reason": "InvalidSpec",
                     "message": "ignored: spec.weight 0 is not greater than 0"}]},
)  # fmt: skip


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    monkeypatch.setattr(queues_cli, "manager_client", lambda *_args: fake.client())
    return fake


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_the_table_shows_usage_of_nominal_per_resource_and_the_shares() -> None:
    header, broken, team_a, team_b = queue_rows([TEAM_B, BROKEN, TEAM_A], wide=False)
    assert re.split(r"\s{2,}", header) == ["NAME", "WEIGHT", "PENDING", "ADMITTED", "CPU",
                                         "MEMORY", "NVIDIA.COM/GPU", "FAIR SHARE", "ACTUAL SHARE"]  # fmt: skip
    assert team_a.split() == ["team-a", "1", "12", "32", "32/32", "64Gi/128Gi", "0/-", "25.0%",
                              "25.0%"]  # fmt: skip
    assert team_b.split() == ["team-b", "2", "0", "3", "1500m/-", "0/-", "2/-", "50.0%", "12.5%"]
    # Before the controller wrote a status: dashes, never a crash.
    assert broken.split() == ["broken", "0", "-", "-", "0/-", "0/-", "0/-", "-", "-"]


def test_wide_adds_strategy_borrowing_preemption_and_why_a_queue_is_ignored() -> None:
    _, broken, team_a, team_b = queue_rows([TEAM_A, TEAM_B, BROKEN], wide=True)
    assert team_a.split()[9:13] == ["BestEffortFIFO", "cpu=0", "Never", "Never"]
    assert team_b.split()[9:13] == ["StrictFIFO", "-", "Any", "Never"]
    assert broken.endswith("ignored: spec.weight 0 is not greater than 0")


def test_hostile_objects_print_as_dashes() -> None:
    odd = {"metadata": {"name": "odd"}, "spec": "x", "status": {"usage": ["cpu"], "fairShare": "a"}}
    (_, row) = queue_rows([odd], wide=True)
    assert row.split()[0] == "odd" and "-" in row.split()


def test_the_verb_lists_queues_as_a_table_or_as_kubectl_does(manager: FakeApiserver) -> None:
    for obj in (TEAM_A, TEAM_B):
        manager.put(QUEUES_PATH, json.loads(json.dumps(obj)))
    result = invoke("queues")
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == ["NAME", "team-a", "team-b"]
    listed = json.loads(invoke("queues", "-o", "json").output)
    assert listed["kind"] == "List" and [q["metadata"]["name"] for q in listed["items"]] == [
        "team-a", "team-b",
    ]  # fmt: skip
    assert invoke("queues", "-o", "name").output.splitlines() == [
        "relayqueue.jobrelay.dev/team-a", "relayqueue.jobrelay.dev/team-b",
    ]  # fmt: skip


def test_no_queues_says_so(manager: FakeApiserver) -> None:
    result = invoke("queues")
    assert result.exit_code == 0 and result.output.startswith("no RelayQueues")


def test_without_the_crd_one_line_says_how_to_install_it(manager: FakeApiserver) -> None:
    manager.refuse = (404, "NotFound")
    result = invoke("queues")
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert "serves no RelayQueues" in line and "charts/jobrelay/files/crds/" in line


def test_a_refusal_is_one_line(manager: FakeApiserver) -> None:
    manager.forbidden = {"relayqueues"}
    result = invoke("queues")
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=6), inner, max_size=2)
    ),
    max_leaves=8,
)


@given(
    st.lists(st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), _values), max_size=3)
)
def test_any_queue_objects_print_as_rows(objects: list[Any]) -> None:
    for wide in (False, True):
        assert len(queue_rows(objects, wide=wide)) == len(objects) + 1


# -- kubectl's list manners: jsonpath, custom-columns, -w -----------------------------------


def test_queues_take_jsonpath_and_custom_columns(manager: FakeApiserver) -> None:
    manager.put(QUEUES_PATH, TEAM_A)
    manager.put(QUEUES_PATH, TEAM_B)
    names = invoke("queues", "-o", "jsonpath={.items[*].metadata.name}")
    assert (names.exit_code, names.output) == (0, "team-a team-b")
    columns = invoke("queues", "-o", "custom-columns=NAME:.metadata.name,WEIGHT:.spec.weight")
    assert columns.output.splitlines() == ["NAME     WEIGHT", "team-a   1", "team-b   2"]
    refused = invoke("queues", "-o", "jsonpath=")
    assert refused.exit_code == 2 and refused.stderr.startswith("error: ")


def test_queues_watch_prints_each_changed_row_until_ctrl_c(manager: FakeApiserver) -> None:
    manager.put(QUEUES_PATH, TEAM_A)
    busier = {**TEAM_A, "status": {**TEAM_A["status"], "pending": 99}}
    manager.watch_events.extend([("MODIFIED", busier), ("ADDED", TEAM_B)])
    result = invoke("queues", "-w")
    assert result.exit_code == 130
    header, first, changed, added = result.output.splitlines()
    assert header.startswith("NAME") and first.split()[:3] == ["team-a", "1", "12"]
    assert changed.split()[:3] == ["team-a", "1", "99"]
    assert added.split()[0] == "team-b"
    watched = [params for method, path, params, _ in manager.requests if params.get("watch")]
    assert watched and watched[0]["resourceVersion"] == "1"  # from the list's version


def test_queues_watch_as_json_prints_each_changed_object(manager: FakeApiserver) -> None:
    manager.put(QUEUES_PATH, TEAM_A)
    manager.watch_events.append(("MODIFIED", TEAM_B))
    result = invoke("queues", "-w", "-o", "name")
    assert result.output.splitlines() == [
        "relayqueue.jobrelay.dev/team-a",
        "relayqueue.jobrelay.dev/team-b",
    ]


@pytest.mark.parametrize(
    ("lines", "name", "row"),
    [
        (["NAME  X", "team-a  1", "team-ab  2"], "team-ab", "team-ab  2"),
        (["NAME  X", "team-a  1", "team-ab  2"], "team-a", "team-a  1"),
        (["NAME  X", "other  1"], "gone", "other  1"),  # not found: the last row
    ],
)
def test_a_watch_prints_the_row_of_the_changed_object(
    lines: list[str], name: str, row: str
) -> None:
    from jobrelay.cli.object_watch import changed_row

    assert changed_row(lines, name) == row
