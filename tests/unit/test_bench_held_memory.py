from __future__ import annotations

from bench.held_memory import job_object, main
from click.testing import CliRunner

from jobrelay.kinds.mirrors import LAST_APPLIED_ANNOTATION


def test_the_held_workload_memory_benchmark_runs_and_reports() -> None:
    result = CliRunner().invoke(main, ["--workloads", "20", "--bulk", "1000"])
    assert result.exit_code == 0, result.output
    assert "20 held Jobs of " in result.output and "(bulk 1000)" in result.output
    assert "KiB each kept (tracemalloc)" in result.output
    assert "from 20 pod templates" in result.output


def test_jobs_of_one_template_differ_only_in_what_is_their_own() -> None:
    one, other = job_object(1, templates=5), job_object(6, templates=5)
    assert one["spec"]["template"]["spec"] == other["spec"]["template"]["spec"]
    assert one["metadata"]["uid"] != other["metadata"]["uid"]
    distinct = job_object(6)
    assert distinct["spec"]["template"]["spec"] != one["spec"]["template"]["spec"]


def test_its_jobs_carry_what_an_applied_job_carries() -> None:
    job = job_object(3, bulk=10)
    assert LAST_APPLIED_ANNOTATION in job["metadata"]["annotations"]
    assert job["metadata"]["managedFields"]
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[-1] == {"name": "BULK", "value": "<" * 10}
