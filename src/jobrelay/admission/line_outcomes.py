"""What one admission pass decided of each queue's pending workloads, kept as runs.

A pass over a hundred thousand held workloads decides mostly long runs alike: ninety-nine
thousand held for one reason, in a few runs per queue. Writing each one's hold and
position into two dicts on every pass took about a fifth of the pass (and their memory
stayed with the plan); here each queue's outcome is its pending entries in order and the
runs of one hold, and one workload's hold and place are found when asked. A reconcile
asks for one; `jobrelay get` and the pending API walk them all.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from jobrelay.admission.queue_model import Entry, QueueHold

__all__ = ["Holds", "LineOutcome", "Positions"]

_V = TypeVar("_V")


class LineOutcome:
    """One queue's pending entries in its order, and what the pass decided of each:
    admitted, or held for a reason (runs of one hold object), or not judged."""

    __slots__ = ("_admitted", "_ends", "_holds", "_index", "_starts", "entries")

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = entries
        # Held runs: entries[starts[k]:ends[k]] wait for holds[k]; in order, disjoint.
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._holds: list[QueueHold] = []
        self._admitted: list[int] = []  # indices, ascending
        self._index: dict[str, int] | None = None

    # -- what the pass decides, in its queue's order -------------------------------------

    def admit(self, at: int) -> None:
        self._admitted.append(at)

    def hold(self, start: int, end: int, why: QueueHold) -> None:
        """Entries ``start`` to ``end`` (exclusive) wait for ``why``."""
        if start >= end:
            return
        if self._holds and self._holds[-1] is why and self._ends[-1] == start:
            self._ends[-1] = end  # the run goes on
            return
        self._starts.append(start)
        self._ends.append(end)
        self._holds.append(why)

    # -- what is asked of it -------------------------------------------------------------

    def index_of(self, key: str) -> int | None:
        """Where the entry keyed ``key`` stands in the queue's order (None: not here)."""
        if self._index is None:  # made on the first question: most plans get none
            self._index = {entry.key: at for at, entry in enumerate(self.entries)}
        return self._index.get(key)

    def hold_at(self, at: int) -> QueueHold | None:
        run = bisect_right(self._starts, at) - 1
        return self._holds[run] if run >= 0 and at < self._ends[run] else None

    def position_at(self, at: int) -> int | None:
        """Its place among those not admitted, 1 = next (None: admitted)."""
        before = bisect_left(self._admitted, at)
        if before < len(self._admitted) and self._admitted[before] == at:
            return None
        return at + 1 - before

    def held(self) -> Iterator[tuple[str, QueueHold]]:
        for start, end, why in zip(self._starts, self._ends, self._holds, strict=True):
            for entry in self.entries[start:end]:
                yield entry.key, why

    def held_count(self) -> int:
        return sum(end - start for start, end in zip(self._starts, self._ends, strict=True))

    def places(self) -> Iterator[tuple[str, int]]:
        for at, place in self._waiting():
            yield self.entries[at].key, place

    def waiting_count(self) -> int:
        return len(self.entries) - len(self._admitted)

    def heads(self, count: int) -> Iterator[tuple[Entry, QueueHold | None, int]]:
        """The first ``count`` entries not admitted: each with its hold and place."""
        for at, place in self._waiting():
            if place > count:
                return
            yield self.entries[at], self.hold_at(at), place

    def _waiting(self) -> Iterator[tuple[int, int]]:
        """Each entry not admitted, in order: its index and its place."""
        admitted = iter(self._admitted)
        skip, place = next(admitted, -1), 0
        for at in range(len(self.entries)):
            if at == skip:
                skip = next(admitted, -1)
                continue
            place += 1
            yield at, place


class _ByEntryKey(Mapping[str, _V]):
    """A read-only mapping by entry key over the queues' outcomes, each key found
    through ``queue_of`` (each entry key's queue)."""

    __slots__ = ("_lines", "_queue_of")

    def __init__(self, lines: Mapping[str, LineOutcome], queue_of: Mapping[str, str]) -> None:
        self._lines = lines
        self._queue_of = queue_of

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"

    def __getitem__(self, key: str) -> _V:
        queue = self._queue_of.get(key)
        line = self._lines.get(queue) if queue is not None else None
        at = line.index_of(key) if line is not None else None
        value = self._at(line, at) if line is not None and at is not None else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        for line in self._lines.values():
            for key, _ in self._pairs(line):
                yield key

    def __len__(self) -> int:
        return sum(self._count(line) for line in self._lines.values())

    # What each mapping reads of one queue's outcome.
    def _at(self, line: LineOutcome, at: int) -> _V | None:
        raise NotImplementedError

    def _pairs(self, line: LineOutcome) -> Iterator[tuple[str, _V]]:
        raise NotImplementedError

    def _count(self, line: LineOutcome) -> int:
        raise NotImplementedError


class Holds(_ByEntryKey[QueueHold]):
    """Each held entry's hold, by entry key."""

    __slots__ = ()

    def _at(self, line: LineOutcome, at: int) -> QueueHold | None:
        return line.hold_at(at)

    def _pairs(self, line: LineOutcome) -> Iterator[tuple[str, QueueHold]]:
        return line.held()

    def _count(self, line: LineOutcome) -> int:
        return line.held_count()


class Positions(_ByEntryKey[int]):
    """Each entry's place in its queue's order after the pass, 1 = next, by entry key;
    admitted entries take no place."""

    __slots__ = ()

    def _at(self, line: LineOutcome, at: int) -> int | None:
        return line.position_at(at)

    def _pairs(self, line: LineOutcome) -> Iterator[tuple[str, int]]:
        return line.places()

    def _count(self, line: LineOutcome) -> int:
        return line.waiting_count()
