"""Each local cluster accepts a client certificate and static bearer tokens, and has a
kubeconfig per credential kind (checked against a real apiserver in
tests/integration/localfleet/test_credentials.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from jobrelay.localfleet import cluster, pki
from jobrelay.localfleet.binaries.resolver import Binaries
from jobrelay.localfleet.cluster_files import ClusterFiles, Credential

USERS = [pki.TokenUser("admin-ish", ("system:masters", "team")), pki.TokenUser("nobody")]


def test_static_tokens_are_written_as_the_apiserver_reads_them_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "pki" / "tokens.csv"
    tokens = pki.ensure_static_tokens(path, USERS)
    rows = list(csv.reader(path.read_text().splitlines()))
    assert rows == [
        [tokens["admin-ish"], "admin-ish", "admin-ish", "system:masters,team"],
        [tokens["nobody"], "nobody", "nobody", ""],
    ]
    assert len(set(tokens.values())) == 2
    assert all(len(token) >= 32 for token in tokens.values())
    assert path.stat().st_mode & 0o777 == 0o600
    # A restart keeps the tokens the kubeconfigs hold; a new user gets one of its own.
    again = pki.ensure_static_tokens(path, [*USERS, pki.TokenUser("late")])
    assert {name: again[name] for name in tokens} == tokens
    assert again["late"] not in tokens.values()


@pytest.fixture
def prepared(tmp_path: Path) -> tuple[ClusterFiles, dict[str, int]]:
    ca = pki.ensure_ca(tmp_path / "pki")
    admin = pki.issue(ca, tmp_path / "pki", "admin", common_name="admin")
    files = ClusterFiles(tmp_path, "worker-1")
    ports = dict(
        zip(cluster.PORT_NAMES, range(20000, 20000 + len(cluster.PORT_NAMES)), strict=True)
    )
    cluster.prepare(files, ca=ca, admin=admin, ports=ports)
    return files, ports


def test_every_credential_has_a_kubeconfig_for_the_same_server(
    prepared: tuple[ClusterFiles, dict[str, int]],
) -> None:
    files, _ = prepared
    tokens = {row[1]: row[0] for row in csv.reader(files.token_file.read_text().splitlines())}
    assert files.credential_kubeconfig(Credential.CERT) == files.admin_kubeconfig
    for credential in Credential:
        path = files.credential_kubeconfig(credential)
        config = yaml.safe_load(path.read_text())
        assert path.stat().st_mode & 0o777 == 0o600
        assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:20002"
        user = config["users"][0]["user"]
        if credential is Credential.CERT:
            assert set(user) == {"client-certificate", "client-key"}
        else:
            assert user == {"token": tokens[cluster.TOKEN_USERS[credential].name]}


def test_the_token_kubeconfigs_survive_a_restart(
    prepared: tuple[ClusterFiles, dict[str, int]], tmp_path: Path
) -> None:
    files, ports = prepared
    before = files.credential_kubeconfig(Credential.TOKEN).read_text()
    ca = pki.ensure_ca(tmp_path / "pki")
    admin = pki.issue(ca, tmp_path / "pki", "admin", common_name="admin")
    cluster.prepare(files, ca=ca, admin=admin, ports=ports)
    assert files.credential_kubeconfig(Credential.TOKEN).read_text() == before


def test_the_apiserver_reads_the_token_file(
    prepared: tuple[ClusterFiles, dict[str, int]],
) -> None:
    files, ports = prepared
    fake = Path("/fake")
    argv = cluster.commands(
        files, Binaries(fake, fake, fake, fake, fake, fake, fake), ca=fake, ports=ports
    )
    assert f"--token-auth-file={files.token_file}" in argv["kube-apiserver"]


def test_a_kubeconfig_has_exactly_one_credential(tmp_path: Path) -> None:
    pair = pki.CertPair(tmp_path / "c.crt", tmp_path / "c.key")
    for extra in ({}, {"client": pair, "token": "t"}):
        with pytest.raises(ValueError, match="exactly one"):
            cluster.write_kubeconfig(
                tmp_path / "k", cluster="c", server="https://x", ca=tmp_path / "ca", **extra
            )


def test_only_the_manager_keeps_the_service_account_admission_plugin(
    prepared: tuple[ClusterFiles, dict[str, int]], tmp_path: Path
) -> None:
    """jobrelay's admission probe asks the manager whether a workload's ServiceAccount
    exists, as a real manager answers; simulated worker pods mount no token."""
    worker_files, ports = prepared
    fake = Path("/fake")
    binaries = Binaries(fake, fake, fake, fake, fake, fake, fake)
    disabled = "--disable-admission-plugins=ServiceAccount"
    worker = cluster.commands(worker_files, binaries, ca=fake, ports=ports)
    assert disabled in worker["kube-apiserver"]
    manager = cluster.commands(ClusterFiles(tmp_path, "manager"), binaries, ca=fake, ports=ports)
    assert not any("ServiceAccount" in arg for arg in manager["kube-apiserver"])


def test_every_apiserver_runs_the_aggregation_layer_with_a_front_proxy_ca_of_its_own(
    prepared: tuple[ClusterFiles, dict[str, int]],
) -> None:
    from cryptography import x509

    files, ports = prepared
    fake = Path("/fake")
    argv = cluster.commands(
        files, Binaries(fake, fake, fake, fake, fake, fake, fake), ca=fake, ports=ports
    )["kube-apiserver"]
    front = files.front_proxy_pki
    for flag in (
        f"--requestheader-client-ca-file={front / 'ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={front / 'client.crt'}",
        f"--proxy-client-key-file={front / 'client.key'}",
        "--enable-aggregator-routing=true",
    ):
        assert flag in argv
    client = x509.load_pem_x509_certificate((front / "client.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((front / "ca.crt").read_bytes())
    client.verify_directly_issued_by(ca)
    assert client.subject.rfc4514_string() == "CN=front-proxy-client"
    # Not the CA users' certificates come from: a user's certificate is no front proxy.
    users_ca = x509.load_pem_x509_certificate((files.state_dir / "pki" / "ca.crt").read_bytes())
    assert ca.subject != users_ca.subject and ca.public_key() != users_ca.public_key()
