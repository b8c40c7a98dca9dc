"""Where one local cluster keeps its files, and which credentials its kubeconfigs hold."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path


class Credential(enum.StrEnum):
    """What a kubeconfig of a local cluster authenticates with."""

    # The admin client certificate (group system:masters): DIR/<cluster>.kubeconfig.
    CERT = "cert"
    # A bearer token of an admin-equivalent user (group system:masters).
    TOKEN = "token"
    # A bearer token of a user no RBAC rule grants anything (only what every
    # authenticated user may do, such as GET /version).
    NO_RIGHTS_TOKEN = "no-rights-token"


@dataclass(frozen=True)
class ClusterFiles:
    """Where one cluster keeps its data, certificates, kubeconfigs and logs."""

    state_dir: Path
    name: str

    @property
    def root(self) -> Path:
        return self.state_dir / self.name

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state_dir / f"{self.name}.kubeconfig"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    def log(self, component: str) -> Path:
        return self.root / "logs" / f"{component}.log"

    def kubeconfig(self, component: str) -> Path:
        return self.root / f"{component}.kubeconfig"

    @property
    def kwok_stages(self) -> Path:
        """kwok's first --config: the shared stages and this cluster's image refusals."""
        return self.root / "kwok-stages.yaml"

    @property
    def kwok_logs(self) -> Path:
        """kwok's second --config: the ClusterLogs that answer every pod's pods/log."""
        return self.root / "kwok-logs.yaml"

    @property
    def front_proxy_pki(self) -> Path:
        """The aggregation layer's own CA (``ca.crt``, ``ca.key``) and the apiserver's
        front-proxy client certificate (``client.crt``, ``client.key``)."""
        return self.pki / "front-proxy"

    @property
    def token_file(self) -> Path:
        """The apiserver's ``--token-auth-file``."""
        return self.pki / "tokens.csv"

    def credential_kubeconfig(self, credential: Credential) -> Path:
        """The kubeconfig for a person or a test, authenticating with ``credential``."""
        if credential is Credential.CERT:
            return self.admin_kubeconfig
        return self.root / f"{credential.value}.kubeconfig"
