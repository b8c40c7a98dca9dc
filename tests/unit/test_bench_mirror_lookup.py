from __future__ import annotations

from bench.mirror_lookup import _pool, main
from click.testing import CliRunner

from jobrelay.kinds.base import WorkloadKey


def test_both_lookups_find_the_same_mirrors() -> None:
    pool = _pool(4, 40)
    assert len(pool.mirror_keys()) == 40
    assert pool.has_mirror(WorkloadKey("Job.v1.batch", "team-0005/run-1-5"))
    assert not pool.has_mirror(WorkloadKey("Job.v1.batch", "team-0005/job-5"))


def test_the_mirror_lookup_benchmark_runs_and_reports() -> None:
    result = CliRunner().invoke(main, ["--held", "300", "--running", "30", "--workers", "1,3",
                                       "--repeats", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "3 workers, 300 workloads, 30 mirrors: a lookup per worker " in result.output
