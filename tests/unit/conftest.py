"""Unit tests fail when code under test swallowed an exception.

An informer, a background task or the event loop that logs an exception with its
traceback (ERROR and above, ``exc_info`` set) and carries on would let a test pass by
accident: a fake that does not answer a request, a handler that raises, a task that
dies. Such a record fails the test that caused it, naming it. A test that provokes one
on purpose says so with ``@pytest.mark.logs_exceptions`` (and checks it with caplog).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


class _Swallowed(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None and record.exc_info[0] is not None:
            self.records.append(record)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "logs_exceptions: the test provokes a logged exception on purpose"
    )


@pytest.fixture(autouse=True)
def no_swallowed_exceptions(request: pytest.FixtureRequest) -> Iterator[None]:
    handler = _Swallowed()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
    if handler.records and request.node.get_closest_marker("logs_exceptions") is None:
        first = handler.records[0]
        error = first.exc_info[1] if first.exc_info else None
        pytest.fail(
            f"{len(handler.records)} exception(s) logged and swallowed during the test; "
            f"the first, from {first.name}: {first.getMessage()}: {error!r}",
            pytrace=False,
        )
