"""A pod whose log its worker would not give, inside a log stream: pure.

A log answer is streamed: its status (200) is sent before any pod's log is read, so
a worker's refusal of one pod (403 on pods/log, the pod gone, a broken stream) can
only be said in the stream. The API writes it as one line of its own,
``[jobrelay: pod NAME: WHY]`` (with ``--all-pods``, after the pod's ``[pod/NAME] ``
prefix like every line of it); `jobrelay logs` takes such lines out of the output,
prints the others' logs, and then says each refusal on stderr and exits non-zero
(`kubectl get --raw` and the dashboard show the line as it is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PodRefusal", "RefusalFilter", "pod_refusal_line"]

_LINE = re.compile(rb"^(?:\[pod/[^\] ]+\] )?\[jobrelay: pod ([^\s:\]]+): (.+)\]\r?$")
# A line this long is no refusal line: passed on without waiting for its end (a pod
# name is at most 253 bytes, the reason a short sentence).
_MAX_REFUSAL_LINE = 4096
# Refusals kept per stream: a pod's own output may look like one, and must not grow
# the reader's memory (the rest are counted, not kept).
MAX_REFUSALS_KEPT = 64


@dataclass(frozen=True)
class PodRefusal:
    """A pod's log its worker refused (or lost) mid-answer, and why."""

    pod: str
    why: str

    @property
    def forbidden(self) -> bool:
        return self.why == "Forbidden"


def pod_refusal_line(pod: str, why: str) -> bytes:
    """The line the API writes in place of ``pod``'s log (or after its part of it)."""
    return f"[jobrelay: pod {pod}: {why}]\n".encode()


class RefusalFilter:
    """A log stream with its refusal lines taken out (and kept in ``refusals``).

    Only a line that starts with ``[`` is held until its end (it may be one); any
    other output passes on at once, so a follow shows each line as it comes.
    """

    def __init__(self) -> None:
        self.refusals: list[PodRefusal] = []
        self.refusals_dropped = 0  # past MAX_REFUSALS_KEPT
        self._held = b""  # the start of a line that may be a refusal
        self._passing = False  # inside a line known to be output

    def feed(self, chunk: bytes) -> bytes:
        """What of ``chunk`` (after what came before) to print now."""
        out = bytearray()
        data = chunk
        while data:
            if self._passing:
                end = data.find(b"\n")
                if end < 0:
                    out += data
                    break
                out += data[: end + 1]
                data = data[end + 1 :]
                self._passing = False
                continue
            if not self._held and not data.startswith(b"["):
                self._passing = True
                continue
            end = data.find(b"\n")
            if end < 0:
                self._held += data
                if len(self._held) > _MAX_REFUSAL_LINE:
                    out += self._held
                    self._held, self._passing = b"", True
                break
            line, data = self._held + data[:end], data[end + 1 :]
            self._held = b""
            out += self._line(line, b"\n")
        return bytes(out)

    def flush(self) -> bytes:
        """What is left at the end of the stream (a last line without its newline)."""
        held, self._held, self._passing = self._held, b"", False
        return self._line(held, b"") if held else b""

    def _line(self, line: bytes, end: bytes) -> bytes:
        found = _LINE.match(line)
        if found is None:
            return line + end
        pod, why = (part.decode("utf-8", "replace") for part in found.groups())
        if len(self.refusals) < MAX_REFUSALS_KEPT:
            self.refusals.append(PodRefusal(pod, why))
        else:
            self.refusals_dropped += 1
        return b""
