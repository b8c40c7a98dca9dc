from __future__ import annotations

from bench.admission_pass import main
from click.testing import CliRunner


def test_the_admission_pass_benchmark_runs_and_reports() -> None:
    result = CliRunner().invoke(
        main, ["--clusters", "3", "--queues", "5", "--pending", "300", "--admitted", "50",
               "--repeats", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "300 pending workloads in 5 queues, 3 clusters: pass median" in result.output
    assert "p95" in result.output and "admitted" in result.output and "target" in result.output
