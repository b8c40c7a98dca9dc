"""The fleet CA and the certificates it issues: names, usages, and reuse across restarts."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from jobrelay.localfleet import pki


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture
def ca(tmp_path: Path) -> pki.CertPair:
    return pki.ensure_ca(tmp_path / "pki")


def test_ca_is_a_ca_that_may_sign_certificates(ca: pki.CertPair) -> None:
    cert = load(ca.cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert cert.subject == cert.issuer
    assert ca.key.stat().st_mode & 0o777 == 0o600


def test_serving_certificate_names_every_host_and_serves_only(
    ca: pki.CertPair, tmp_path: Path
) -> None:
    hosts = ("127.0.0.1", "localhost", "10.96.0.1", "kubernetes.default.svc")
    pair = pki.issue(
        ca, tmp_path / "out", "apiserver", common_name="kube-apiserver", server_hosts=hosts
    )
    cert = load(pair.cert)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.96.0.1"),
    ]
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "kubernetes.default.svc"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(load(ca.cert))


def test_client_certificate_carries_user_and_group(ca: pki.CertPair, tmp_path: Path) -> None:
    pair = pki.issue(
        ca, tmp_path / "out", "admin", common_name="jobrelay-admin", organization="system:masters"
    )
    cert = load(pair.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "jobrelay-admin"
    assert (
        cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    )
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    cert.verify_directly_issued_by(load(ca.cert))
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    assert key.public_key() == cert.public_key()


def test_existing_files_are_reused_not_reissued(ca: pki.CertPair, tmp_path: Path) -> None:
    first = pki.issue(ca, tmp_path / "out", "scheduler", common_name="system:kube-scheduler")
    before = first.cert.read_bytes(), first.key.read_bytes()
    again = pki.issue(ca, tmp_path / "out", "scheduler", common_name="system:kube-scheduler")
    assert (again.cert.read_bytes(), again.key.read_bytes()) == before
    assert pki.ensure_ca(tmp_path / "pki") == ca
    ca_bytes = ca.cert.read_bytes()
    pki.ensure_ca(tmp_path / "pki")
    assert ca.cert.read_bytes() == ca_bytes


def test_a_half_written_pair_is_issued_afresh(ca: pki.CertPair, tmp_path: Path) -> None:
    first = pki.issue(ca, tmp_path / "out", "scheduler", common_name="system:kube-scheduler")
    old_cert = first.cert.read_bytes()
    first.key.unlink()
    again = pki.issue(ca, tmp_path / "out", "scheduler", common_name="system:kube-scheduler")
    assert again.cert.read_bytes() != old_cert
    key = serialization.load_pem_private_key(again.key.read_bytes(), password=None)
    assert key.public_key() == load(again.cert).public_key()


def test_service_account_key_pair_matches_and_is_kept(tmp_path: Path) -> None:
    private, public = pki.ensure_service_account_key(tmp_path)
    key = serialization.load_pem_private_key(private.read_bytes(), password=None)
    assert key.public_key() == serialization.load_pem_public_key(public.read_bytes())
    before = private.read_bytes()
    pki.ensure_service_account_key(tmp_path)
    assert private.read_bytes() == before
