from __future__ import annotations

from bench.held_backlog import main
from click.testing import CliRunner


def reported(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_held_backlog_benchmark_runs_and_reports() -> None:
    output = reported("--workloads", "1200", "--queues", "7", "--room", "10", "--repeats", "2")
    assert "1200 Jobs from 20 pod templates in 7 queues: ready after " in output
    assert "(10 admitted, 1190 held; the CPU clock's median over the same passes " in output
    assert "admission pass median" in output and "RSS" in output


def test_judged_on_the_cpu_clock_it_names_the_wall_clocks_median_too() -> None:
    output = reported("--workloads", "300", "--queues", "3", "--room", "5", "--repeats", "1",
                      "--clock", "cpu")  # fmt: skip
    assert "held; the wall clock's median over the same passes " in output
