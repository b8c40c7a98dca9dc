"""Port choice outside the ephemeral range, and naming whoever holds a taken port.

No test here may depend on which ports happen to be in use (a fleet may be
running, and its components open connections all the time) or on how fast the
kernel moves a connection through its states. So every port a test looks at is
one it holds itself: bound by the test with SO_REUSEADDR but not listening (a
*reservation*), such a port still counts as free for ``ports.is_free`` (which
binds with SO_REUSEADDR, like Go's listeners), yet no other socket can bind it
without SO_REUSEADDR, and the kernel never hands it to an outgoing connection
(it skips explicitly bound ports). Where pure logic is tested (``pick``), the
free/taken answers are faked instead.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import listen_on

from jobrelay.localfleet import ports


def reserve(port: int) -> socket.socket:
    """A reservation of 127.0.0.1:``port`` (0: one the kernel finds unused by any socket)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


@pytest.fixture
def reserved_block() -> Iterator[Callable[[int], list[socket.socket]]]:
    """Reserve ``count`` consecutive ports; all are released after the test."""
    held: list[socket.socket] = []

    def make(count: int) -> list[socket.socket]:
        for _ in range(100):
            block = [reserve(0)]
            first = block[0].getsockname()[1]
            try:
                block += [reserve(port) for port in range(first + 1, first + count)]
            except OSError:  # a neighbour is in use: try another start
                for sock in block:
                    sock.close()
                continue
            held.extend(block)
            return block
        raise AssertionError(f"found no {count} consecutive free ports in 100 tries")

    yield make
    for sock in held:
        sock.close()


@pytest.fixture
def listener(reserved_block: Callable[[int], list[socket.socket]]) -> Iterator[socket.socket]:
    """A listener on a port the test reserved, so that no other socket shares its number."""
    (reservation,) = reserved_block(1)
    with listen_on(reservation.getsockname()[1]) as sock:
        yield sock


def only_candidates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, first: int, last: int) -> None:
    """Make ``first``..``last`` the only ports ``pick`` considers."""
    monkeypatch.setattr(ports, "LOWEST_PICKED_PORT", first)
    set_ephemeral_range(monkeypatch, tmp_path, f"{last + 1} {ports.HIGHEST_PORT}")


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait for a state the kernel reaches asynchronously (never for a fixed time)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def set_ephemeral_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text(text)
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", range_file)


def test_ephemeral_range_is_read_and_defaults_when_unreadable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    set_ephemeral_range(monkeypatch, tmp_path, "40000\t50000\n")
    assert ports.ephemeral_range() == (40000, 50000)
    set_ephemeral_range(monkeypatch, tmp_path, "garbage")
    assert ports.ephemeral_range() == (32768, 60999)


def test_picked_ports_are_distinct_free_and_outside_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    set_ephemeral_range(monkeypatch, tmp_path, "32768 60999")
    # Which ports this machine uses must not matter: every third one counts as taken.
    checked: list[int] = []

    def is_free(port: int) -> bool:
        checked.append(port)
        return port % 3 != 0

    monkeypatch.setattr(ports, "is_free", is_free)
    picked = ports.pick(36, exclude={10001, 61001}, rng=random.Random(7))
    assert len(set(picked)) == 36
    assert all(ports.LOWEST_PICKED_PORT <= port <= 65535 for port in picked)
    assert not any(32768 <= port <= 60999 for port in picked)
    assert all(port % 3 for port in picked)
    assert not {10001, 61001} & set(checked)
    assert checked[-1] == picked[-1]  # it stops checking once it has enough


@pytest.mark.parametrize(
    ("setting", "expected", "ephemeral"),
    [
        ("20000-20999", range(20000, 21000), "32768 60999"),
        # Across the ephemeral range: only its two sides.
        ("32000-62000", [*range(32000, 32768), *range(61000, 62001)], "32768 60999"),
        # Wholly inside it: its own ports all the same, as asked.
        ("40000-40049", range(40000, 40050), "32768 60999"),
    ],
)
def test_picks_stay_within_jobrelay_fleet_ports(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    setting: str,
    expected: range | list[int],
    ephemeral: str,
) -> None:
    set_ephemeral_range(monkeypatch, tmp_path, ephemeral)
    monkeypatch.setenv(ports.PORT_RANGE_VARIABLE, setting)
    monkeypatch.setattr(ports, "is_free", lambda port: port % 5 != 0)
    picked = ports.pick(24, rng=random.Random(3))
    assert len(set(picked)) == 24
    assert set(picked) <= set(expected)
    assert all(port % 5 for port in picked)


def test_a_range_with_too_few_free_ports_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    set_ephemeral_range(monkeypatch, tmp_path, "32768 60999")
    monkeypatch.setenv(ports.PORT_RANGE_VARIABLE, "20000-20009")
    monkeypatch.setattr(ports, "is_free", lambda port: port != 20004)
    assert sorted(ports.pick(9, rng=random.Random(1))) == [
        port for port in range(20000, 20010) if port != 20004
    ]
    with pytest.raises(ValueError, match="20000-20009 has 9 free ports, and 10 are needed"):
        ports.pick(10, rng=random.Random(1))


@pytest.mark.parametrize("setting", ["20000", "b-c", "30000-20000", "80-90", "60000-70000"])
def test_a_malformed_jobrelay_fleet_ports_is_refused(
    monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv(ports.PORT_RANGE_VARIABLE, setting)
    with pytest.raises(ValueError, match="give LOW-HIGH"):
        ports.pick(1)


def test_an_empty_jobrelay_fleet_ports_is_no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ports.PORT_RANGE_VARIABLE, " ")
    assert ports.port_range_setting() is None


def test_a_taken_candidate_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    reserved_block: Callable[[int], list[socket.socket]],
) -> None:
    # Candidates are only the three ports the test holds; the middle one taken
    # leaves exactly the other two.
    block = reserved_block(3)
    first = block[0].getsockname()[1]
    only_candidates(monkeypatch, tmp_path, first, first + 2)
    block[1].listen()
    assert sorted(ports.pick(2, rng=random.Random(1))) == [first, first + 2]


def test_without_room_outside_the_ephemeral_range_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    low, high = ports.ephemeral_range()
    set_ephemeral_range(monkeypatch, tmp_path, "1024 65535")
    picked = ports.pick(4)
    assert len(set(picked)) == 4
    # Chosen by bind(0), which only hands out ports of the kernel's real range.
    # (Whether they are still free afterwards is up to the machine's other sockets.)
    assert all(low <= port <= high for port in picked)


def test_listening_port_is_not_free_until_closed(
    reserved_block: Callable[[int], list[socket.socket]],
) -> None:
    (reservation,) = reserved_block(1)
    port = reservation.getsockname()[1]
    assert ports.is_free(port)
    with listen_on(port):
        assert not ports.is_free(port)
    assert ports.is_free(port)


def test_holder_of_a_listening_port_is_named_by_pid(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert ports.describe_holder(port).startswith(f"listened on by pid {os.getpid()} (")


def test_holder_of_a_dual_stack_listener_is_found() -> None:
    with listen_on(0, host="::") as sock:
        port = sock.getsockname()[1]
        assert not ports.is_free(port)
        assert f"pid {os.getpid()}" in ports.describe_holder(port)


def test_a_port_in_time_wait_is_explained(listener: socket.socket) -> None:
    # The client binds its port itself before connecting: a port the kernel lets
    # no other socket share, where one it picked at connect() time may also be
    # the local port of other connections (to other addresses), say a running
    # fleet's, which describe_holder could then report instead.
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.bind(("127.0.0.1", 0))
    client.connect(listener.getsockname())
    server_side, _ = listener.accept()
    client_port = client.getsockname()[1]
    client.close()  # the side that closes first keeps the port in TIME_WAIT
    server_side.close()
    # FIN_WAIT2 turns into TIME_WAIT when the kernel has handled the other FIN.
    wait_until(lambda: "TIME_WAIT" in ports.describe_holder(client_port), "TIME_WAIT")
    assert ports.describe_holder(client_port) == (
        "the local end of a closed connection in TIME_WAIT, which the kernel frees within 60 s"
    )
    assert not ports.is_free(client_port)


def test_free_port_is_described_as_free(
    reserved_block: Callable[[int], list[socket.socket]],
) -> None:
    (reservation,) = reserved_block(1)
    assert ports.describe_holder(reservation.getsockname()[1]) == "free now"


def test_free_block_skips_past_a_taken_port(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    reserved_block: Callable[[int], list[socket.socket]],
) -> None:
    block = reserved_block(8)
    first = block[0].getsockname()[1]
    block[2].listen()
    # The ephemeral range begins right after the block: free_block looks only below it.
    set_ephemeral_range(monkeypatch, tmp_path, f"{first + 8} {ports.HIGHEST_PORT}")
    assert ports.free_block(5, start=first) == first + 3
    assert ports.free_block(6, start=first) is None  # no room below the range any more
