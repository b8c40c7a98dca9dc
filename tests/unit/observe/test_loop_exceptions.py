"""The controller's loop exception handler: a cancelled connection's TLS failure left in
a future is not an error with a traceback; anything else still is."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import pytest

from jobrelay.observe.logging import loop_exception_handler

LEFTOVER = "Future exception was never retrieved"


class Loop:
    """The default handler's calls, recorded."""

    def __init__(self) -> None:
        self.passed_on: list[dict[str, Any]] = []

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.passed_on.append(context)


@pytest.mark.parametrize(
    "exception",
    [
        ssl.SSLCertVerificationError(1, "certificate verify failed: certificate signature failure"),
        ssl.SSLError(1, "handshake failure"),
        ConnectionResetError(104, "Connection reset by peer"),
    ],
)
def test_a_connection_failure_nobody_awaited_is_a_debug_line(
    exception: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    loop = Loop()
    with caplog.at_level(logging.DEBUG, logger="jobrelay.loop"):
        loop_exception_handler(
            loop,  # type: ignore[arg-type]
            {"message": LEFTOVER, "exception": exception, "future": asyncio.Future},
        )
    assert loop.passed_on == []
    assert [record.levelno for record in caplog.records] == [logging.DEBUG]


def test_tls_writing_on_a_connection_closed_already_is_a_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = Loop()
    closed = RuntimeError(
        "unable to perform operation on <TCPTransport closed=True reading=False 0x55>; "
        "the handler is closed"
    )
    with caplog.at_level(logging.DEBUG, logger="jobrelay.loop"):
        loop_exception_handler(
            loop,  # type: ignore[arg-type]
            {"message": "Fatal error on SSL protocol", "exception": closed},
        )
    assert loop.passed_on == []
    assert [record.levelno for record in caplog.records] == [logging.DEBUG]


@pytest.mark.parametrize(
    "context",
    [
        {"message": LEFTOVER, "exception": KeyError("a bug of ours")},
        {"message": "Fatal error on SSL protocol", "exception": RuntimeError("a bug of ours")},
        {"message": "Task exception was raised", "exception": ssl.SSLError(1, "x")},
        {"message": "Unclosed client session"},
    ],
)
def test_anything_else_goes_to_asyncios_own_handler(context: dict[str, Any]) -> None:
    loop = Loop()
    loop_exception_handler(loop, context)  # type: ignore[arg-type]
    assert loop.passed_on == [context]
