"""``python -m bench.log_split [MB]``: one log line of MB megabytes without a newline.

Pure, no fleet: 64 KiB chunks through ``relayapi.logstreams.prefixed`` (what
``jobrelay logs --all-pods`` runs each pod's stream through), with the CPU time and
the peak memory it takes. Run it with ``PYTHONPATH=<old checkout>/src`` for the
code before: a line buffered until its newline cost quadratic CPU and all its bytes.
"""

from __future__ import annotations

import asyncio
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator

from jobrelay.relayapi.logstreams import prefixed

CHUNK = 65536


async def _chunks(megabytes: int) -> AsyncIterator[bytes]:
    piece = b"x" * CHUNK
    for _ in range(megabytes * 2**20 // CHUNK):
        yield piece


async def _through(megabytes: int) -> int:
    passed = 0
    async for part in prefixed(b"[pod-0] ", _chunks(megabytes)):
        passed += len(part)
    return passed


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    tracemalloc.start()
    started = time.process_time()
    passed = asyncio.run(_through(megabytes))
    cpu = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    print(f"{megabytes} MB line: {cpu:.2f} s CPU, peak {peak:.1f} MiB, {passed} bytes passed on")


if __name__ == "__main__":
    main()
