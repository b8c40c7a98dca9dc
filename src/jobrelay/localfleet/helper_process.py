"""What the local fleet's helper processes share (the stand-in operators, the job
stand-in of light workers, the stand-in autoscaler): a run until SIGTERM or SIGINT, and
an error said in one line with exit status 1 instead of a traceback."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine, Iterable
from typing import Any

from jobrelay.kube.errors import ApiError, KubeconfigError

__all__ = ["run_helper", "until_stopped"]


async def until_stopped(waits: Iterable[asyncio.Future[Any]]) -> None:
    """Until SIGTERM or SIGINT, or until one of ``waits`` ends; then cancels them all."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pending = [*waits, asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in pending:
            wait.cancel()


def run_helper(what: str, serve: Coroutine[Any, Any, None], *, verbose: bool = False) -> int:
    """Runs ``serve`` with logging to stderr; the exit status (1: said why, as ``what``)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        asyncio.run(serve)
    except (ApiError, KubeconfigError, OSError) as error:
        print(f"{what}: {error}", file=sys.stderr)
        return 1
    return 0
