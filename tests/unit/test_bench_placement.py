from __future__ import annotations

from bench.placement_decision import main
from click.testing import CliRunner


def test_the_placement_benchmark_runs_and_reports() -> None:
    result = CliRunner().invoke(main, ["--clusters", "3", "--nodes", "20", "--repeats", "3"])
    assert result.exit_code == 0, result.output
    assert "3 clusters x 20 nodes" in result.output
    assert "never fits (1 pod x 128 cpu)" in result.output and "NeverFits" in result.output
    assert "worst median" in result.output


def test_the_held_pass_benchmark_runs_and_reports() -> None:
    from bench.placement_held import main as held

    result = CliRunner().invoke(held, ["--clusters", "3", "--nodes", "20", "--held", "200",
                                       "--repeats", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "200 held workloads, 3 clusters x 20 nodes: pass median" in result.output
    assert "woken" in result.output and "target" in result.output
