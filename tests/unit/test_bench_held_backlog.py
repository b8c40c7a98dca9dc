from __future__ import annotations

from bench.held_backlog import main
from click.testing import CliRunner


def test_the_held_backlog_benchmark_runs_and_reports() -> None:
    result = CliRunner().invoke(
        main, ["--workloads", "1200", "--queues", "7", "--room", "10", "--repeats", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "1200 Jobs from 20 pod templates in 7 queues: ready after " in result.output
    assert "(10 admitted, 1190 held; the CPU clock's median over the same passes " in (
        result.output
    )
    assert "admission pass median" in result.output and "RSS" in result.output
    on_cpu = CliRunner().invoke(
        main, ["--workloads", "300", "--queues", "3", "--room", "5", "--repeats", "1",
               "--clock", "cpu"],
    )  # fmt: skip
    assert on_cpu.exit_code == 0, on_cpu.output
    assert "held; the wall clock's median over the same passes " in on_cpu.output
