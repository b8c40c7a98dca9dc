"""Structured logs: one JSON object per line (for machines) or aligned text (for people).

Context travels as ``extra={...}`` on each call (``job``, ``cluster``, ...),
so every line about a Job can be found by its key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import sys
import time
from typing import Any, Literal

LogFormat = Literal["json", "text"]

# Attributes every LogRecord has; anything else came in through ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = (
            time.strftime("%H:%M:%S", time.localtime(record.created)) + f".{int(record.msecs):03d}"
        )
        context = " ".join(f"{key}={value}" for key, value in _extras(record).items())
        line = f"{stamp} {record.levelname:<7} {record.getMessage()}" + (
            f"  {context}" if context else ""
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(log_format: LogFormat = "text", level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx2 logs every request at INFO: far too chatty for a controller.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)


_LOOP_LOG = logging.getLogger("jobrelay.loop")


def loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's own handler, but for two leftovers of connections already given up.

    uvloop keeps a TLS handshake's waiter even when the connect that made it was
    cancelled at that moment (a request timing out against a worker whose certificate
    is wrong): the request already failed and was handled. And uvloop's TLS layer may
    still try to write on a connection that was just closed (many log streams or watches
    closed at once; uvloop issue 506), failing with "the handler is closed": the
    connection is gone by our own hand. Each is one debug line, not an error with a
    traceback in the operator's log."""
    exception = context.get("exception")
    message = str(context.get("message") or "")
    leftover = "never retrieved" in message
    if leftover and isinstance(exception, ssl.SSLError | ConnectionError):
        _LOOP_LOG.debug("a cancelled connection attempt failed too: %s", exception)
        return
    if (
        message.startswith("Fatal error on SSL protocol")
        and isinstance(exception, RuntimeError)
        and "the handler is closed" in str(exception)
    ):
        _LOOP_LOG.debug("TLS wrote on a connection closed already: %s", exception)
        return
    loop.default_exception_handler(context)
