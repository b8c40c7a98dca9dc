"""The API's TLS context loads its certificate without a temporary directory."""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

import pytest

from jobrelay.web.tls import self_signed, server_context


def test_the_serving_context_needs_no_temporary_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # As in the pod: read-only root, no /tmp: every tempfile call fails.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))
    cert, key = self_signed(["localhost"])
    context = server_context(cert, key, None)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert list(tmp_path.iterdir()) == []


def test_without_memfd_it_falls_back_to_a_private_directory_removed_after(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cert, key = self_signed(["localhost"])
    server_context(cert, key, None)
    assert list(tmp_path.iterdir()) == []


def test_a_key_that_does_not_match_is_refused() -> None:
    cert, _key = self_signed(["localhost"])
    _other_cert, other_key = self_signed(["localhost"])
    with pytest.raises(ssl.SSLError):
        server_context(cert, other_key, None)


def test_no_descriptor_is_left_open() -> None:
    before = set(os.listdir("/proc/self/fd"))
    cert, key = self_signed(["localhost"])
    for _ in range(5):
        server_context(cert, key, None)
    assert set(os.listdir("/proc/self/fd")) <= before
