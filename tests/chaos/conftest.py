"""Fixtures of the chaos test: a fleet of its own, and a report at the end of pytest's output.

The fleet (manager + 3 workers, ample nodes) lives in a temporary directory and
always goes down, purged, after the module, whatever happened: the faults the
test injects (frozen and killed apiservers) must never leak into other tests,
so it never shares the session's fleet.

The figures are shown whether the test passes or fails, without ``-s``: the
test hands its lines to ``report``, and ``pytest_terminal_summary`` writes them
as a section of the terminal summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from jobrelay.localfleet.fleet_state import NodeShape
from jobrelay.localfleet.orchestration import LocalFleet

CHAOS_WORKERS = 3
# Room for every pod at once on every worker: placement, not capacity, is under test.
CHAOS_NODES = NodeShape(count=2, cpu="64", memory="256Gi", pods=500)

_REPORT = pytest.StashKey[list[tuple[str, list[str]]]]()


@pytest.fixture(scope="module")
def chaos_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    local = LocalFleet(tmp_path_factory.mktemp("chaos-fleet"), progress=lambda _message: None)
    try:
        # A fresh event loop: no asyncio loop runs while module fixtures are set up.
        asyncio.run(local.up(workers=CHAOS_WORKERS, node_shape=CHAOS_NODES))
        yield local
    finally:
        local.down(purge=True)


@pytest.fixture
def report(request: pytest.FixtureRequest) -> list[str]:
    """Lines for the chaos section of the terminal summary (shown even if the test fails)."""
    lines: list[str] = []
    request.config.stash.setdefault(_REPORT, []).append((request.node.nodeid, lines))
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reports = terminalreporter.config.stash.get(_REPORT, [])
    if reports:
        terminalreporter.section("chaos")
    for nodeid, lines in reports:
        terminalreporter.write_line(nodeid)
        for line in lines or ["(no figures: the test stopped before it had any)"]:
            terminalreporter.write_line(line)
