"""Choosing the fleet's TCP ports on 127.0.0.1, and saying who holds a taken one.

Ports are picked outside the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``). Inside it, every outgoing
connection - an apiserver's to its etcd, a health probe's - may be handed a
port we recorded, between our check and the component's bind, or while the
fleet is stopped; outside it only a program that asks for that very port can
take it.
"""

from __future__ import annotations

import errno
import os
import random
import socket
from collections.abc import Collection
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_RANGE_VARIABLE = "JOBRELAY_FLEET_PORTS"
# Below this, well-known services (databases, web servers) are too likely to appear later.
LOWEST_PICKED_PORT = 10000
HIGHEST_PORT = 65535
_TCP_STATES = {
    "01": "ESTABLISHED",
    "02": "SYN_SENT",
    "03": "SYN_RECV",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "06": "TIME_WAIT",
    "07": "CLOSE",
    "08": "CLOSE_WAIT",
    "09": "LAST_ACK",
    "0A": "LISTEN",
    "0B": "CLOSING",
}


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections (inclusive)."""
    try:
        low, high = (int(part) for part in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return low, high


def bind_error(port: int) -> OSError | None:
    """Why a listener on 127.0.0.1:``port`` would fail now, or None when it would not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe_socket:
        # As Go's listeners do, so that what we see is what the components will see.
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe_socket.bind(("127.0.0.1", port))
        except OSError as error:
            return error
    return None


def is_free(port: int) -> bool:
    return bind_error(port) is None


def port_range_setting() -> tuple[int, int] | None:
    """The ports ``JOBRELAY_FLEET_PORTS`` (``LOW-HIGH``, inclusive) confines picks to, if set.

    Fleets given disjoint ranges never pick each other's ports, even one a stopped
    cluster keeps for its restart (say, two CI jobs or test processes on one machine).
    """
    text = os.environ.get(PORT_RANGE_VARIABLE, "").strip()
    if not text:
        return None
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high)
    except ValueError:
        first, last = 0, -1
    if not 1024 <= first <= last <= HIGHEST_PORT:
        raise ValueError(
            f"{PORT_RANGE_VARIABLE}={text!r}: give LOW-HIGH, two ports from 1024 to "
            f"{HIGHEST_PORT}, LOW at most HIGH (e.g. 20000-24999), or unset it"
        )
    return first, last


def pick(
    count: int, *, exclude: Collection[int] = (), rng: random.Random | None = None
) -> list[int]:
    """``count`` distinct free ports, none in ``exclude`` (say, a stopped cluster's),
    outside the ephemeral range when there is room, and within ``JOBRELAY_FLEET_PORTS``
    when set."""
    low, high = ephemeral_range()
    confined = port_range_setting()
    first, last = confined or (LOWEST_PICKED_PORT, HIGHEST_PORT)
    candidates = [
        port
        for port in (
            *range(first, max(first, min(low, last + 1))),
            *range(max(first, high + 1), last + 1),
        )
        if port not in exclude
    ]
    if confined is not None and len(candidates) < count:
        # The range lies in the ephemeral one, or is too small: its ports, as asked.
        candidates = [port for port in range(first, last + 1) if port not in exclude]
    chooser = rng or random.SystemRandom()
    chosen: list[int] = []
    # Free ports are the rule, so a handful of random draws per port is plenty;
    # the cap only stops a machine with nearly every port taken from looping.
    for port in chooser.sample(candidates, min(len(candidates), count * 20)):
        if is_free(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    if confined is None:
        return _kernel_picked(count, exclude)
    for port in candidates:  # every one, as the range is all there is
        if port not in chosen and is_free(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise ValueError(
        f"{PORT_RANGE_VARIABLE}={first}-{last} has {len(chosen)} free ports, and {count} "
        "are needed: widen the range, or unset it"
    )


def _kernel_picked(count: int, exclude: Collection[int]) -> list[int]:
    """Ports the kernel chooses (inside the ephemeral range): the last resort."""
    # Hold every socket until all are chosen, so the kernel hands out distinct ports.
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
            if sock.getsockname()[1] in exclude:
                sockets.remove(sock)
                sock.close()
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_block(count: int, *, start: int = 20000) -> int | None:
    """The first N from ``start`` up such that ports N .. N+count-1 are all free and
    below the ephemeral range: a ``--base-port`` worth suggesting."""
    low, _ = ephemeral_range()
    base = start
    while base + count <= low:
        taken = [port for port in range(base, base + count) if not is_free(port)]
        if not taken:
            return base
        base = taken[-1] + 1
    return None


def describe_holder(port: int) -> str:
    """Who keeps ``port`` from being bound: a listening process, a connection, or a reason."""
    error = bind_error(port)
    if error is None:
        return "free now"
    if error.errno == errno.EACCES:
        return "a privileged port: only root may listen on it"
    if error.errno == errno.EADDRNOTAVAIL:
        return "127.0.0.1 is not available on this machine"
    entries = _sockets_on(port)
    listeners = [inode for state, inode in entries if state == "LISTEN"]
    for inode in listeners:
        owner = _process_with_socket(inode)
        if owner:
            return f"listened on by {owner}"
    if listeners:
        return "listened on by a process we cannot see (another user's or container's)"
    if entries:
        state = entries[0][0]
        if state == "TIME_WAIT":
            return "the local end of a closed connection in TIME_WAIT, which the kernel frees within 60 s"
        owner = _process_with_socket(entries[0][1])
        return f"the local end of a {state} connection" + (f" of {owner}" if owner else "")
    return f"in use ({error.strerror})"


def _sockets_on(port: int) -> list[tuple[str, int]]:
    """(state, inode) of every TCP socket whose local port is ``port``, listeners first."""
    found: list[tuple[str, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if int(local.rsplit(":", 1)[1], 16) == port:
                found.append((_TCP_STATES.get(state, state), inode))
    found.sort(key=lambda entry: entry[0] != "LISTEN")
    return found


def _process_with_socket(inode: int) -> str | None:
    """ "pid N (command line)" of a process holding socket ``inode``, if we may look."""
    if not inode:
        return None
    target = f"socket:[{inode}]"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"/proc/{pid}/fd/{descriptor}") == target:
                    return f"pid {pid} ({command_line(int(pid))})"
            except OSError:
                continue
    return None


def command_line(pid: int, limit: int = 120) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
