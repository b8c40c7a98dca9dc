"""The settings of the controller's logs/mirror API (`jobrelay run --api-*`): pure."""

from __future__ import annotations

from dataclasses import dataclass

from jobrelay.relayapi.rules import Limits

__all__ = ["ApiSettings"]


@dataclass(frozen=True)
class ApiSettings:
    """The read-only HTTPS API of remote logs and the mirror view (jobrelay.relayapi)."""

    # HOST:PORT to serve it on; "" serves none (opt-in, like the probes: two local
    # replicas never collide; deploy/deployment.yaml sets :8443). Port 0 picks one.
    address: str = ""
    # The URL published for clients; "" derives it from the bound address.
    url: str = ""
    # Serving certificate and key (PEM files); none: a self-signed one made at start.
    cert_file: str = ""
    key_file: str = ""
    # Log streams one user may hold open at once.
    max_streams_per_user: int = 5
    # Bytes one non-follow log request returns at most.
    max_bytes: int = 10 * 1024 * 1024
    # A follow ends after this many seconds without output.
    follow_idle_timeout: float = 300.0

    @property
    def limits(self) -> Limits:
        """The bounds the handler enforces."""
        return Limits(
            max_streams_per_user=self.max_streams_per_user,
            max_bytes=self.max_bytes,
            follow_idle_timeout=self.follow_idle_timeout,
        )
