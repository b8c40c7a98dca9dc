"""The JobSet component's files, command line and manifests, without an apiserver."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from tests.unit.localfleet.fakes import fake_manifests, write_fake_manifests

from jobrelay.localfleet import cluster, jobset_controller, pki
from jobrelay.localfleet.binaries.resolver import Binaries
from jobrelay.localfleet.cluster_files import ClusterFiles


@pytest.fixture
def manifests(tmp_path: Path) -> jobset_controller.Manifests:
    return jobset_controller.Manifests.load(write_fake_manifests(tmp_path))


@pytest.fixture
def ca(tmp_path: Path) -> pki.CertPair:
    return pki.ensure_ca(tmp_path / "pki")


def test_webhooks_call_the_local_port_and_trust_the_fleet_ca(
    manifests: jobset_controller.Manifests,
) -> None:
    configurations = jobset_controller.webhook_configurations(manifests, ca_pem=b"PEM", port=24443)
    assert [c["kind"] for c in configurations] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    mutating, validating = (c["webhooks"][0] for c in configurations)
    assert mutating["clientConfig"] == {
        "url": "https://127.0.0.1:24443/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    assert validating["clientConfig"]["url"] == "https://127.0.0.1:24443/validate--v1-pod"
    # Everything else is upstream's, and the loaded manifests are left as they were.
    assert mutating["failurePolicy"] == "Fail"
    assert "service" in manifests.webhook_configurations[0]["webhooks"][0]["clientConfig"]


def test_a_webhook_without_a_service_path_is_refused(tmp_path: Path) -> None:
    data = fake_manifests()
    del data["webhookConfigurations"][1]["webhooks"][0]["clientConfig"]["service"]["path"]
    loaded = jobset_controller.Manifests(
        data["version"], data["crd"], data["clusterRole"], data["webhookConfigurations"]
    )
    with pytest.raises(
        jobset_controller.JobSetError, match=r"webhook vpod\.kb\.io of .* names no service"
    ):
        jobset_controller.webhook_configurations(loaded, ca_pem=b"", port=1)


def test_the_controller_identity_is_bound_to_upstreams_role(
    manifests: jobset_controller.Manifests,
) -> None:
    binding = jobset_controller.cluster_role_binding(manifests)
    assert binding["metadata"]["name"] == "jobset-manager-rolebinding"
    assert binding["roleRef"]["name"] == "jobset-manager-role"
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": jobset_controller.USER}
    ]


def test_slim_crd_drops_schema_descriptions_but_not_a_property_named_description() -> None:
    schema = {
        "description": "JobSet is the Schema for the jobsets API",
        "type": "object",
        "properties": {
            "description": {"description": "a field called description", "type": "string"},
            "spec": {"description": "spec", "type": "object", "x-kubernetes-validations": []},
        },
    }
    crd = {
        "metadata": {"name": "x"},
        "spec": {"versions": [{"schema": {"openAPIV3Schema": schema}}]},
    }
    slim = jobset_controller.slim_crd(crd)
    assert slim["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "spec": {"type": "object", "x-kubernetes-validations": []},
        },
    }
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == schema  # not modified


def test_prepare_writes_the_configuration_and_a_serving_certificate(
    tmp_path: Path, ca: pki.CertPair
) -> None:
    files = ClusterFiles(tmp_path, "worker-1")
    ports = dict.fromkeys(cluster.PORT_NAMES, 0) | {"jobset-webhook": 24443, "jobset-health": 24444}
    files.root.mkdir(parents=True)
    jobset_controller.prepare(files, ca=ca, ports=ports)

    config = yaml.safe_load(jobset_controller.config_path(files).read_text())
    assert config["webhook"] == {
        "host": "127.0.0.1",
        "port": 24443,
        "certDir": str(files.pki / "jobset-webhook"),
    }
    assert config["health"] == {"healthProbeBindAddress": "127.0.0.1:24444"}
    assert config["metrics"] == {"bindAddress": "0"}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}

    cert = x509.load_pem_x509_certificate((files.pki / "jobset-webhook" / "tls.crt").read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert.read_bytes()))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert (files.pki / "jobset-webhook" / "tls.key").exists()
    assert jobset_controller.health_url(ports) == "http://127.0.0.1:24444/readyz"


def test_every_cluster_runs_the_controller_with_its_own_identity(
    tmp_path: Path, ca: pki.CertPair
) -> None:
    files = ClusterFiles(tmp_path, "manager")
    ports = dict(
        zip(cluster.PORT_NAMES, range(20000, 20000 + len(cluster.PORT_NAMES)), strict=True)
    )
    admin = pki.issue(ca, tmp_path / "pki", "admin", common_name="admin")
    cluster.prepare(files, ca=ca, admin=admin, ports=ports)
    fake = Path("/fake")
    argv = cluster.commands(
        files,
        Binaries(fake, fake, fake, fake, fake, Path("/bin/jobset-controller"), fake),
        ca=ca.cert,
        ports=ports,
    )
    assert argv[jobset_controller.COMPONENT] == [
        "/bin/jobset-controller",
        f"--kubeconfig={files.kubeconfig(jobset_controller.COMPONENT)}",
        f"--config={jobset_controller.config_path(files)}",
        "--zap-log-level=info",
    ]
    kubeconfig = yaml.safe_load(files.kubeconfig(jobset_controller.COMPONENT).read_text())
    client_cert = Path(kubeconfig["users"][0]["user"]["client-certificate"])
    subject = x509.load_pem_x509_certificate(client_cert.read_bytes()).subject
    assert subject.rfc4514_string() == f"CN={jobset_controller.USER}"
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:20002"
    assert set(cluster.health_urls(ports)) == set(cluster.COMPONENTS)


def test_an_unreadable_manifests_file_says_how_to_rebuild(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text('{"version": "v0.11.0"}')
    with pytest.raises(
        jobset_controller.JobSetError, match=r"delete its directory and run `jobrelay fleet"
    ):
        jobset_controller.Manifests.load(tmp_path / "m.json")
