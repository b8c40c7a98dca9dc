"""`jobrelay get` with kubectl's output options against an in-memory manager: -o jsonpath,
custom-columns, --sort-by, --no-headers, -L, TYPE/NAME, and a generic kind known from the
controller's Lease (`jobrelay.dev/kinds`) by its plural, singular or short name."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import FakeApiserver
from tests.unit.cli.test_get import JOBS, MANAGED, put_job

from jobrelay.cli import describe as describe_cli
from jobrelay.cli import get as get_cli
from jobrelay.cli.main import cli

RAYJOBS = "ray.io/v1/rayjobs"
LEASES = "coordination.k8s.io/v1/leases"


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver(
        "manager",
        served={
            "ray.io/v1": [
                {"name": "rayjobs", "singularName": "rayjob", "kind": "RayJob",
                 "namespaced": True, "shortNames": ["rj"]},
                {"name": "rayjobs/status", "kind": "RayJob", "namespaced": True},
            ],
            "batch/v1": [{"name": "jobs", "singularName": "job", "kind": "Job", "namespaced": True}],
        },
    )  # fmt: skip
    fake.lead()  # a controller leads: no warning on stderr
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    monkeypatch.setattr(describe_cli, "manager_client", lambda *_args: fake.client())
    put_job(fake, "b-job", labels={"team": "blue", "app.kubernetes.io/name": "trainer"},
            status={"succeeded": 2})  # fmt: skip
    put_job(fake, "a-job", labels={"team": "red"}, status={"succeeded": 1})
    put_job(fake, "c-job", status={"succeeded": 3})
    return fake


def lease(manager: FakeApiserver, kinds: str) -> None:
    manager.lead(annotations={"jobrelay.dev/kinds": kinds, "jobrelay.dev/version": "1.2.3"})


def rayjob(manager: FakeApiserver, name: str) -> None:
    manager.put(RAYJOBS, {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": "2026-01-02T03:00:00Z"},
        "spec": {"managedBy": MANAGED},
    })  # fmt: skip


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["get", "-n", "team-a", *args])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-o", "jsonpath={.items[*].metadata.name}"], "a-job b-job c-job"),
        (
            ["--sort-by", ".metadata.name", "-o", "jsonpath={.items[*].metadata.name}"],
            "a-job b-job c-job",
        ),
        (
            ["--sort-by", "{.status.succeeded}", "-o", "name"],
            "job.batch/a-job\njob.batch/b-job\njob.batch/c-job\n",
        ),
        (
            [
                "-o",
                'jsonpath={range .items[*]}{.metadata.name}={.status.succeeded}{"\\n"}{end}',
                "--sort-by",
                "status.succeeded",
            ],
            "a-job=1\nb-job=2\nc-job=3\n",
        ),
        (["-o", 'jsonpath={.items[?(@.metadata.labels.team=="blue")].metadata.name}'], "b-job"),
        (["job/a-job", "-o", "jsonpath={.metadata.name}"], "a-job"),
        (["jobs", "a-job", "-o", "jsonpath={.metadata.labels.team}"], "red"),
        (["job/a-job", "job/c-job", "-o", "jsonpath={.items[*].status.succeeded}"], "1 3"),
        (["-o", "jsonpath-as-json={.items[*].status.succeeded}"], "[\n    1,\n    2,\n    3\n]\n"),
    ],
)
def test_jsonpath_and_sort_by(manager: FakeApiserver, args: list[str], expected: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected


def test_custom_columns_with_and_without_headers(manager: FakeApiserver) -> None:
    spec = "custom-columns=NAME:.metadata.name,DONE:{.status.succeeded},TEAM:.metadata.labels.team"
    result = invoke("-o", spec, "--sort-by", ".metadata.name")
    assert result.stdout.splitlines() == [
        "NAME    DONE   TEAM",
        "a-job   1      red",
        "b-job   2      blue",
        "c-job   3      <none>",
    ]
    result = invoke("-o", spec, "--sort-by", ".metadata.name", "--no-headers")
    assert result.stdout.splitlines()[0] == "a-job   1   red"


def test_label_columns_and_no_headers_in_the_table(manager: FakeApiserver) -> None:
    result = invoke("-L", "team,app.kubernetes.io/name", "--sort-by", ".metadata.name")
    header, first, second, *_ = result.stdout.splitlines()
    assert header.split()[-3:] == ["TEAM", "NAME", "REASON"]
    assert "a-job" in first.split() and "red" in first.split()
    assert "trainer" in second.split()
    bare = invoke("--no-headers", "--sort-by", ".metadata.name").stdout.splitlines()
    assert "a-job" in bare[0].split() and len(bare) == 3


@pytest.mark.parametrize("type_name", ["rayjobs", "rayjob", "rj", "RayJob", "rayjobs.ray.io",
                                       "RayJob.v1.ray.io"])  # fmt: skip
def test_a_configured_generic_kind_by_any_of_its_names(
    manager: FakeApiserver, type_name: str
) -> None:
    """The defect: generic kinds were invisible to `get` (only Job and JobSet had names)."""
    lease(manager, "Job.v1.batch,RayJob.v1.ray.io")
    rayjob(manager, "ray-1")
    result = invoke(type_name, "-o", "name")
    assert (result.exit_code, result.stdout) == (0, "rayjob.ray.io/ray-1\n"), result.output
    result = invoke(f"{type_name}/ray-1", "job/a-job", "-o", "name")
    assert result.stdout == "rayjob.ray.io/ray-1\njob.batch/a-job\n", result.output


def test_all_is_every_configured_kind(manager: FakeApiserver) -> None:
    lease(manager, "Job.v1.batch,RayJob.v1.ray.io")
    rayjob(manager, "ray-1")
    result = invoke("all", "-o", "name", "--sort-by", ".metadata.name")
    assert result.stdout.splitlines() == [
        "job.batch/a-job", "job.batch/b-job", "job.batch/c-job", "rayjob.ray.io/ray-1",
    ]  # fmt: skip


def test_an_unknown_type_is_a_usage_error(manager: FakeApiserver) -> None:
    lease(manager, "Job.v1.batch,RayJob.v1.ray.io")
    result = invoke("pytorchjobs")
    assert result.exit_code == 2
    assert "doesn't have a resource type 'pytorchjobs'" in result.stderr
    assert "rayjobs" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "jsonpath={.items[*"],
        ["-o", "jsonpath={range .items[*]}{.x}"],
        ["-o", "custom-columns=NAME"],
        ["-o", "table"],
        ["job/a", "b"],
    ],
)
def test_bad_templates_and_arguments_exit_2(manager: FakeApiserver, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output


def test_describe_takes_type_name_and_a_selector(manager: FakeApiserver) -> None:
    one = CliRunner().invoke(cli, ["describe", "-n", "team-a", "job/a-job"])
    assert one.exit_code == 0, one.output
    assert "Name:             a-job" in one.stdout
    put_job(manager, "d-job", labels={"team": "red"})
    both = CliRunner().invoke(cli, ["describe", "-n", "team-a", "jobs", "-l", "team=red"])
    names = [line.split()[1] for line in both.stdout.splitlines() if line.startswith("Name:")]
    assert names == ["a-job", "d-job"], both.output
    lease(manager, "Job.v1.batch,RayJob.v1.ray.io")
    rayjob(manager, "ray-1")
    ray = CliRunner().invoke(cli, ["describe", "-n", "team-a", "rj", "ray-1"])
    assert "Kind:             RayJob (ray.io/v1)" in ray.stdout, ray.output


def test_json_output_is_unchanged(manager: FakeApiserver) -> None:
    listed = json.loads(invoke("-o", "json").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a-job", "b-job", "c-job"]
    assert JOBS  # the same fake paths as test_get


def test_a_kinds_claimed_value_on_the_lease_decides_what_get_lists(manager: FakeApiserver) -> None:
    """A kind the controller runs under the borrowed value (`--kind NAME=VALUE`, recorded on
    its Lease): `get` lists the workloads carrying that value, not the controller's name."""
    lease(manager, "Job.v1.batch,RayJob.v1.ray.io=kueue.x-k8s.io/multikueue")
    rayjob(manager, "ray-1")  # managedBy: the controller's name, not what RayJob claims
    manager.put(RAYJOBS, {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "ray-2", "namespace": "team-a",
                     "creationTimestamp": "2026-01-02T03:00:00Z"},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue"},
    })  # fmt: skip
    result = invoke("rayjobs", "-o", "name")
    assert (result.exit_code, result.stdout) == (0, "rayjob.ray.io/ray-2\n"), result.output
    described = CliRunner().invoke(cli, ["describe", "-n", "team-a", "rj", "ray-2"])
    assert "Managed By:       kueue.x-k8s.io/multikueue" in described.stdout, described.output
