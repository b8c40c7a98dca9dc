"""The bounds of the logs API's streams: pure.

A line splitter whose memory and CPU stay linear however long a line a pod
prints, the byte and rate budget of one followed pod stream, and the count of
open pod streams per user, per worker and overall. The I/O that applies them
is ``logstreams.py`` (the chunks) and ``handler.py`` (the accounting).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = [
    "CONTINUED",
    "MAX_LINE_BYTES",
    "LineSplitter",
    "RateBudget",
    "StreamBudget",
    "StreamClaim",
]

# A line longer than this is passed on in pieces of this size, each but the last
# ending with CONTINUED: a pod printing one endless line costs bounded memory.
MAX_LINE_BYTES = 64 * 1024
CONTINUED = b" [jobrelay: line continues]\n"


class LineSplitter:
    """Prefixes each line of a byte stream cut anywhere (kubectl --prefix).

    Only new bytes are scanned for newlines and a partial line is kept as one
    growing buffer, so the cost is linear in the input; a partial line reaching
    ``limit`` bytes is passed on at once, ending with :data:`CONTINUED`.
    """

    def __init__(self, prefix: bytes, limit: int = MAX_LINE_BYTES) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.prefix = prefix
        self.limit = limit
        self._pending = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held back: always below ``limit``."""
        return len(self._pending)

    def feed(self, chunk: bytes) -> bytes:
        """What ``chunk`` completes: whole lines and cut pieces, prefixed (b"" if none)."""
        out = bytearray()
        view = memoryview(chunk)
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            rest: bytes | memoryview = view[start : newline + 1]
            if len(self._pending) + newline - start > self.limit:
                # Longer than the limit, if only with this chunk's part: cut as well.
                self._pending += view[start:newline]
                self._cut(out, ended=True)
                rest = b"\n"
            out += self.prefix
            if self._pending:
                out += self._pending
                self._pending.clear()
            out += rest
            start = newline + 1
        if start < len(chunk):
            self._pending += view[start:]
            self._cut(out)
        return bytes(out)

    def _cut(self, out: bytearray, *, ended: bool = False) -> None:
        """Passes on full pieces of the pending line; ``ended``: its newline has come, so
        a last piece of exactly the limit stays for the caller to end."""
        limit, pending = self.limit, self._pending
        taken = 0
        while len(pending) - taken > limit or (not ended and len(pending) - taken == limit):
            out += self.prefix
            out += pending[taken : taken + limit]
            out += CONTINUED
            taken += limit
        if taken:
            del pending[:taken]  # once per chunk, never per piece

    def flush(self) -> bytes:
        """The last partial line, prefixed and ended (b"" if none)."""
        if not self._pending:
            return b""
        out = self.prefix + bytes(self._pending) + b"\n"
        self._pending.clear()
        return out


@dataclass
class RateBudget:
    """A token bucket of bytes: ``rate`` per second, up to ``burst`` at once."""

    rate: float
    burst: float
    _tokens: float = field(init=False)
    _at: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._tokens = self.burst

    def wait(self, now: float, size: int) -> float:
        """Seconds to wait before passing on ``size`` bytes at ``now`` (they are counted)."""
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= size
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


@dataclass(frozen=True, slots=True)
class StreamClaim:
    """Pod streams one request holds open on one worker, for one user."""

    user: str
    worker: str
    streams: int


class StreamBudget:
    """Open pod streams per user, per worker and overall, each at most its limit.

    Pod streams, not requests, are counted: one ``--all-pods -f`` of a 60-pod Job
    holds 60 of them (and a watch, counted on its worker). Not thread-safe: one loop.
    """

    def __init__(self, *, per_user: int, per_worker: int, overall: int) -> None:
        self.per_user = per_user
        self.per_worker = per_worker
        self.overall = overall
        self._users: Counter[str] = Counter()
        self._workers: Counter[str] = Counter()
        self._total = 0

    def claim(self, user: str, worker: str, streams: int) -> StreamClaim | str:
        """The claim, or why it is refused (a message for the user)."""
        if streams > min(self.per_user, self.per_worker, self.overall):
            return (
                f"this request needs {streams} log streams and at most "
                f"{min(self.per_user, self.per_worker, self.overall)} may be open at once for "
                "one request; read fewer pods (--index, or without --all-pods)"
            )
        if self._users[user] + streams > self.per_user:
            return (
                f"at most {self.per_user} log streams per user at once: {self._users[user]} "
                f"are open, this request needs {streams}; end a follow first"
            )
        if self._workers[worker] + streams > self.per_worker:
            return (
                f'at most {self.per_worker} log streams from worker "{worker}" at once and '
                f"{self._workers[worker]} are open; try again later"
            )
        if self._total + streams > self.overall:
            return (
                f"the controller serves at most {self.overall} log streams at once; try again later"
            )
        self._users[user] += streams
        self._workers[worker] += streams
        self._total += streams
        return StreamClaim(user, worker, streams)

    def release(self, claim: StreamClaim) -> None:
        for counter, key in ((self._users, claim.user), (self._workers, claim.worker)):
            counter[key] -= claim.streams
            if counter[key] <= 0:
                del counter[key]
        self._total -= claim.streams

    def open(self, *, user: str | None = None, worker: str | None = None) -> int:
        """Streams open for ``user``, from ``worker``, or in all."""
        if user is not None:
            return self._users[user]
        if worker is not None:
            return self._workers[worker]
        return self._total
