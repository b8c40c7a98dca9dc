"""Port choice outside the ephemeral range, and naming whoever holds a taken port."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import listen_on

from jobrelay.localfleet import ports


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with listen_on(0) as sock:
        yield sock


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


def test_picked_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    low, high = ports.ephemeral_range()
    picked = ports.pick(36, rng=random.Random(7))
    assert len(set(picked)) == 36
    assert all(ports.LOWEST_PICKED_PORT <= port <= 65535 for port in picked)
    assert not any(low <= port <= high for port in picked)
    assert all(ports.is_free(port) for port in picked)


def test_a_taken_candidate_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Candidates are only 10000-10002; one of them taken leaves exactly the other two.
    set_ephemeral_range(monkeypatch, tmp_path, "10003 65535")
    try:
        taken = listen_on(10001)
    except OSError:
        pytest.skip("port 10001 is in use on this machine")
    with taken:
        assert sorted(ports.pick(2, rng=random.Random(1))) == [10000, 10002]


def test_without_room_outside_the_ephemeral_range_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    set_ephemeral_range(monkeypatch, tmp_path, "1024 65535")
    picked = ports.pick(4)
    assert len(set(picked)) == 4
    assert all(ports.is_free(port) for port in picked)


def test_listening_port_is_not_free_until_closed(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert not ports.is_free(port)
    listener.close()
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
    client = socket.create_connection(listener.getsockname())
    server_side, _ = listener.accept()
    client_port = client.getsockname()[1]
    client.close()  # the side that closes first keeps the port in TIME_WAIT
    server_side.close()
    assert not ports.is_free(client_port)
    assert "TIME_WAIT" in ports.describe_holder(client_port)


def test_free_port_is_described_as_free() -> None:
    port = ports.pick(1)[0]
    assert ports.describe_holder(port) == "free now"


def test_free_block_skips_past_a_taken_port(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    set_ephemeral_range(monkeypatch, tmp_path, "40000 65535")
    taken = ports.pick(1)[0]
    with listen_on(taken):
        base = ports.free_block(6, start=taken - 2)
    assert base is not None
    assert taken < base <= 40000 - 6
    assert all(ports.is_free(port) for port in range(base, base + 6))
