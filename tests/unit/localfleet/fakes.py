"""Fake fleet binaries: tiny shell scripts that answer ``--version`` as told, and a fake
``go`` that answers ``go version -m`` for the fake Go binaries."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobrelay.localfleet import ports
from jobrelay.localfleet.binaries.jobset_manifests import JOBSET_MANIFESTS
from jobrelay.localfleet.binaries.versions import JOBSET_MODULE, JOBSET_VERSION

VERSIONS = {
    "kube-apiserver": "Kubernetes v1.35.4",
    "kube-controller-manager": "Kubernetes v1.35.4",
    "kube-scheduler": "Kubernetes v1.35.4",
    "etcd": "etcd Version: 3.4.23\nGit SHA: Not provided",
    "kwok": "kwok version v0.7.0 go1.26.8 (linux/amd64)",
    # Not a --version answer: the module version in the fake's Go build information.
    "jobset-controller": JOBSET_VERSION,
}

FakeBinaries = Callable[..., Path]


def write_script(path: Path, version: str, *, when_run: str = "exit 1") -> Path:
    """A script printing ``version`` for --version, and doing ``when_run`` otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = --version ]; then\n  cat <<'EOF'\n{version}\nEOF\n  exit 0\nfi\n"
        f"{when_run}\n"
    )
    path.chmod(0o755)
    return path


def listen_on(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listener on ``port``, as a program squatting on the fleet's port would hold it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    # Like Go's listeners: ports of recently stopped fleets linger in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    return sock


def listen_in_free_block(size: int, offset: int, *, tries: int = 50) -> tuple[int, socket.socket]:
    """A free block of ``size`` ports and a listener on its port ``offset``, bound in one
    step: a port another process takes between the choice and the bind means another
    block, never a failed test."""
    for _ in range(tries):
        base = ports.free_block(size)
        assert base is not None
        try:
            return base, listen_on(base + offset)
        except OSError:
            continue
    raise AssertionError(f"no free block of {size} ports in {tries} tries")


# The line after which a fake Go binary carries its module information.
_MODULE_INFO_MARK = "# GO_MODULE_INFO"


def write_fake_go(directory: Path, go_version: str = "go1.26.8") -> Path:
    """A ``go`` answering ``go version -m FILE`` as the Go toolchain does (the header, then
    each line of the module information indented by a tab) for what ``write_go_binary``
    wrote, and failing like it for any other file."""
    directory.mkdir(parents=True, exist_ok=True)
    go = directory / "go"
    go.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = version ] && [ "$2" = -m ] && grep -qx \'{_MODULE_INFO_MARK}\' "$3"; then\n'
        f'  echo "$3: {go_version}"\n'
        f"  sed -n '/^{_MODULE_INFO_MARK}$/,$p' \"$3\" | tail -n +2 | sed 's/^/\\t/'\n"
        "  exit 0\n"
        "fi\n"
        'echo "$3: could not read Go build info from $3: unrecognized file format" >&2\n'
        "exit 1\n"
    )
    go.chmod(0o755)
    return go


def jobset_module_info(version: str, *, module: str = JOBSET_MODULE) -> str:
    """What `go version -m` shows of a JobSet controller built as jobrelay builds it."""
    return (
        f"path\t{module}\n"
        f"mod\t{module}\t{version}\th1:fake=\n"
        "dep\tk8s.io/api\tv0.35.0\th1:fake=\n"
        "build\t-trimpath=true\n"
    )


def write_go_binary(path: Path, module_info: str, *, when_run: str = "exit 1") -> Path:
    """A script doing ``when_run``, carrying ``module_info`` for the fake ``go`` to show."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{when_run}\nexit 1\n{_MODULE_INFO_MARK}\n{module_info}")
    path.chmod(0o755)
    return path


def fake_manifests(version: str = JOBSET_VERSION) -> dict[str, Any]:
    """A jobset-manifests.json as ``binaries`` writes it, shrunk to one webhook each."""

    def webhook(name: str, path: str) -> dict[str, Any]:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "webhook-service", "path": path}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
        }

    return {
        "version": version,
        "crd": {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "jobsets.jobset.x-k8s.io"},
            "spec": {"group": "jobset.x-k8s.io"},
        },
        "clusterRole": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "jobset-manager-role"},
            "rules": [],
        },
        "webhookConfigurations": [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "jobset-mutating-webhook-configuration"},
                "webhooks": [webhook("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset")],
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "jobset-validating-webhook-configuration"},
                "webhooks": [webhook("vpod.kb.io", "/validate--v1-pod")],
            },
        ],
    }


def write_fake_manifests(directory: Path, version: str = JOBSET_VERSION) -> Path:
    path = directory / JOBSET_MANIFESTS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fake_manifests(version)))
    return path
