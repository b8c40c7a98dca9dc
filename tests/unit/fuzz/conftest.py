"""Prints each fuzz test's example count and time in the terminal summary."""

from __future__ import annotations

import pytest
from tests.unit.fuzz.hostile import EXAMPLES, SECONDS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not EXAMPLES:
        return
    terminalreporter.section("fuzz (hypothesis): examples run")
    for name, examples in sorted(EXAMPLES.items()):
        terminalreporter.write_line(f"fuzz: {name} {examples} examples in {SECONDS[name]:.2f}s")
    total = sum(EXAMPLES.values())
    terminalreporter.write_line(f"fuzz: {total} examples in {sum(SECONDS.values()):.2f}s in all")
