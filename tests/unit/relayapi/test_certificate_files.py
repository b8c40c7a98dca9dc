"""--api-cert-file and friends are re-read as a kubelet updates a mounted Secret (a new
directory behind the ``..data`` symlink): the content counts, never the mtime; new
handshakes get the new certificate, with no restart."""

from __future__ import annotations

import asyncio
import datetime
import os
import ssl
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography import x509
from tests.kubetools import eventually
from tests.unit.controller.fakes import FakeCluster

from jobrelay.relayapi.certificate_files import CertificateFiles, ServedFiles
from jobrelay.relayapi.serving import start_api
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.web.tls import certificate_authority, signed_serving_certificate

HOSTS = ["jr-api.team.svc", "127.0.0.1"]
YEAR = datetime.timedelta(days=365)


def _authority() -> tuple[bytes, bytes]:
    return certificate_authority("ca", YEAR)


def _issued(ca: tuple[bytes, bytes]) -> dict[str, bytes]:
    cert, key = signed_serving_certificate(*ca, HOSTS, YEAR)
    return {"tls.crt": cert, "tls.key": key, "ca.crt": ca[0]}


class MountedSecret:
    """A Secret volume laid out as a kubelet does: ``..<stamp>/`` holding the keys,
    ``..data`` linking to it, each key a link through ``..data``."""

    def __init__(self, root: Path, data: dict[str, bytes]) -> None:
        self.root = root
        self._generation = 0
        self.update(data)
        for key in data:
            (root / key).symlink_to(Path("..data") / key)

    def update(self, data: dict[str, bytes]) -> None:
        self._generation += 1
        stamp = self.root / f"..2026_11_29_{self._generation}"
        stamp.mkdir()
        for key, value in data.items():
            (stamp / key).write_bytes(value)
        staged = self.root / "..data_tmp"
        staged.symlink_to(stamp.name)
        os.replace(staged, self.root / "..data")  # the atomic swap

    def path(self, key: str) -> str:
        return str(self.root / key)


def _files(
    mounted: MountedSecret, current: ServedFiles, served: list[ServedFiles]
) -> CertificateFiles:
    return CertificateFiles(
        mounted.path("tls.crt"), mounted.path("tls.key"), mounted.path("ca.crt"), current,
        served.append, interval=3600,
    )  # fmt: skip


def _as_served(data: dict[str, bytes]) -> ServedFiles:
    return data["tls.crt"], data["tls.key"], data["ca.crt"]


async def test_a_swapped_data_link_is_seen_by_content_and_served_once(tmp_path: Path) -> None:
    ca = _authority()
    first, second = _issued(ca), _issued(ca)
    mounted = MountedSecret(tmp_path, first)
    served: list[ServedFiles] = []
    files = _files(mounted, _as_served(first), served)
    assert not await files.check()  # unchanged
    mounted.update(second)
    # The link's own mtime and the files' are not what is compared: content is.
    assert await files.check()
    assert not await files.check()
    assert served == [_as_served(second)]


async def test_a_set_that_cannot_be_served_is_kept_out_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = _authority()
    first = _issued(ca)
    mounted = MountedSecret(tmp_path, first)
    refusals: list[ServedFiles] = []

    def refuse(found: ServedFiles) -> None:
        refusals.append(found)
        raise ValueError("the API certificate is not signed by --api-ca-file's CA")

    files = CertificateFiles(
        mounted.path("tls.crt"), mounted.path("tls.key"), mounted.path("ca.crt"),
        _as_served(first), refuse, interval=3600,
    )  # fmt: skip
    mounted.update(_issued(_authority()) | {"ca.crt": ca[0]})  # another CA's certificate
    assert not await files.check()
    assert not await files.check()
    assert len(refusals) == 2  # tried each time (a half-swapped read heals by itself)
    assert caplog.text.count("not serving the changed API certificate files") == 1


async def test_files_that_vanish_meanwhile_are_read_again_later(tmp_path: Path) -> None:
    ca = _authority()
    first = _issued(ca)
    mounted = MountedSecret(tmp_path, first)
    served: list[ServedFiles] = []
    files = _files(mounted, _as_served(first), served)
    (tmp_path / "..data").unlink()
    assert not await files.check()
    assert served == []


async def _served(port: int, ca: bytes) -> x509.Certificate:
    context = ssl.create_default_context(cadata=ca.decode())
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="jr-api.team.svc"
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der)


async def _handle(*_args: Any) -> None:
    return None


async def test_the_api_serves_a_renewed_certificate_from_the_next_handshake(tmp_path: Path) -> None:
    ca = _authority()
    first, second = _issued(ca), _issued(ca)
    mounted = MountedSecret(tmp_path, first)
    settings = ApiSettings(
        address="127.0.0.1:0", cert_file=mounted.path("tls.crt"),
        key_file=mounted.path("tls.key"), ca_file=mounted.path("ca.crt"),
        cert_reload_interval=0.05,
    )  # fmt: skip
    async with FakeCluster("manager").client() as manager:
        api = await start_api(manager, settings, lambda _t: SimpleNamespace(handle=_handle),
                              namespace="team")  # fmt: skip
        try:
            port = api.bound[1]
            assert await _served(port, ca[0]) == x509.load_pem_x509_certificate(first["tls.crt"])
            mounted.update(second)
            renewed = x509.load_pem_x509_certificate(second["tls.crt"])

            async def renewed_served() -> bool:
                return await _served(port, ca[0]) == renewed

            await eventually(renewed_served, timeout=10, interval=0.05, what="the renewal served")
        finally:
            await api.close()
