from __future__ import annotations

from bench.capacity_rss import main
from click.testing import CliRunner


def test_the_capacity_memory_benchmark_runs_and_reports() -> None:
    result = CliRunner().invoke(main, ["--nodes", "20", "--pods", "200", "--events", "50"])
    assert result.exit_code == 0, result.output
    assert "20 nodes, 200 pods fed" in result.output
    assert "bytes per object" in result.output
    assert "capacity() from scratch" in result.output and "WorkerCapacity(20 nodes" in result.output
    assert "within the 200 MiB target" in result.output
