"""Fake fleet binaries: tiny shell scripts that answer ``--version`` as told."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobrelay.localfleet import ports
from jobrelay.localfleet.binaries import JOBSET_MANIFESTS, JOBSET_MODULE, JOBSET_VERSION

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


# The 16-byte markers Go puts around the module information in a binary.
_MODINFO_START = bytes.fromhex("3077af0c9274080241e1c107e6d618e6")
_MODINFO_END = bytes.fromhex("f932433186182072008242104116d8f2")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def go_build_info(module_info: str, go_version: str = "go1.26.8") -> bytes:
    """The build information block Go 1.18+ writes into a binary (16-byte aligned there)."""
    info = _MODINFO_START + module_info.encode() + _MODINFO_END
    header = b"\xff Go buildinf:" + bytes([8, 2]) + bytes(16)
    return header + _uvarint(len(go_version)) + go_version.encode() + _uvarint(len(info)) + info


def jobset_module_info(version: str, *, module: str = JOBSET_MODULE) -> str:
    """What `go version -m` shows of a JobSet controller built as jobrelay builds it."""
    return (
        f"path\t{module}\n"
        f"mod\t{module}\t{version}\th1:fake=\n"
        "dep\tk8s.io/api\tv0.35.0\th1:fake=\n"
        "build\t-trimpath=true\n"
    )


def write_go_binary(path: Path, module_info: str, *, when_run: str = "exit 1") -> Path:
    """A script doing ``when_run``, followed by a Go build information block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    script = f"#!/bin/sh\n{when_run}\nexit 1\n".encode()
    padding = b"#" * (-len(script) % 16)
    path.write_bytes(script + padding + go_build_info(module_info))
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
