"""The bench's reading of apiserver_request_total: what counts as a write."""

from __future__ import annotations

from bench.apimetrics import parse_request_totals

EXPOSITION = """\
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="cluster",subresource="",verb="WATCH",version="v1"} 1
"""


def test_dry_runs_are_counted_apart_from_writes() -> None:
    """jobrelay's Pod Security probe is a POST the apiserver stores nothing for."""
    counts = parse_request_totals(EXPOSITION)
    writes = sum(n for key, n in counts.items() if key.is_write)
    dry_runs = sum(n for key, n in counts.items() if key.dry_run)
    assert (writes, dry_runs) == (5, 5)
