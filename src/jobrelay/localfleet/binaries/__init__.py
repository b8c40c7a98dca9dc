"""Find, or build from the Go module proxy, the binaries a local fleet runs.

Release downloads are out of reach, so each component is built from its Go
module: kube-apiserver, kube-controller-manager and kube-scheduler from
``k8s.io/kubernetes`` (``kube_binaries``), kwok with ``go install``
(``kwok_binary``), and the JobSet controller with ``go build`` in a tiny module
requiring ``sigs.k8s.io/jobset`` (``jobset_build``; its CRD, RBAC role and
webhook configurations come from the same module zip, ``jobset_manifests``).
etcd comes from Debian's ``etcd-server`` package (``etcd_binary``). Every
pinned version is in ``versions``; ``resolver.resolve`` finds them all.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


class BinaryError(RuntimeError):
    """A binary is missing, of the wrong version, or could not be built."""
