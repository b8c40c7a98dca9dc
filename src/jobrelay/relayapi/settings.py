"""The settings of the controller's logs/mirror API (`jobrelay run --api-*`): pure."""

from __future__ import annotations

from dataclasses import dataclass

from jobrelay.relayapi.route_rules import Limits

__all__ = ["ApiSettings"]


@dataclass(frozen=True)
class ApiSettings:
    """The aggregated API of remote logs and the mirror view (jobrelay.relayapi)."""

    # HOST:PORT to serve it on; "" serves none (opt-in, like the probes: two local
    # replicas never collide; the Helm chart sets :8443). Port 0 picks one.
    address: str = ""
    # The URL the API is reached by (its Service), named in a self-signed certificate.
    url: str = ""
    # The leader registers APIService v1alpha1.api.jobrelay.dev and a Service reaching
    # this replica (a controller run outside the manager; the chart registers its own).
    register: bool = False
    # Serving certificate and key (PEM files); none: a self-signed one made at start.
    cert_file: str = ""
    key_file: str = ""
    # The CA (PEM file) the aggregator verifies the serving certificate against (the
    # APIService's caBundle): one CA for every replica (the chart's Secret's ca.crt).
    # None: the serving certificate itself.
    ca_file: str = ""
    # The Secret (in the controller's namespace) holding a CA and the serving certificate
    # it signs, made by the first replica to start and renewed by the leader
    # (self_certificate.py); "" none. Not with cert_file/key_file/ca_file.
    cert_secret: str = ""
    # The MutatingWebhookConfiguration whose caBundle the leader keeps at cert_secret's CA
    # (the APIService's it always keeps); "" none.
    ca_bundle_webhook: str = ""
    # Seconds cert_secret's CA and serving certificate are made to last.
    ca_validity: float = 3650 * 86400.0
    cert_validity: float = 365 * 86400.0
    # Seconds between reads of the certificate files for a renewed one, and between the
    # leader's checks of cert_secret (renewal, caBundles, the APIService's availability).
    cert_reload_interval: float = 30.0
    # Pod log streams one user may hold open at once (--all-pods: one per pod).
    max_streams_per_user: int = 100
    # Pod log streams from one worker at once: the size of its own pool for users' streams.
    max_streams_per_worker: int = 200
    # Pod log streams open at once in all.
    max_streams: int = 500
    # Bytes one non-follow log request returns at most.
    max_bytes: int = 10 * 1024 * 1024
    # A follow ends after this many seconds without output.
    follow_idle_timeout: float = 300.0
    # Bytes one followed pod passes on at most, and at most this many a second.
    max_follow_bytes: int = 1024 * 1024 * 1024
    follow_rate: int = 1024 * 1024
    # Seconds a client may take to accept each write before it is dropped.
    write_timeout: float = 30.0
    # Panel watches (fleet, queues, workloads) open at once in all, and per user: no one
    # identity takes every place (a dashboard holds three).
    max_watches: int = 200
    max_watches_per_user: int = 20
    # The failurePolicy of the managedBy webhook it registers with the APIService: Fail
    # refuses a workload it would default while the webhook does not answer (never run
    # on the manager by mistake); Ignore lets it through unchanged.
    webhook_failure_policy: str = "Fail"

    @property
    def limits(self) -> Limits:
        """The bounds the handler enforces."""
        return Limits(
            max_streams_per_user=self.max_streams_per_user,
            max_streams_per_worker=self.max_streams_per_worker,
            max_streams=self.max_streams,
            max_bytes=self.max_bytes,
            follow_idle_timeout=self.follow_idle_timeout,
            max_follow_bytes=self.max_follow_bytes,
            follow_rate=self.follow_rate,
            write_timeout=self.write_timeout,
            max_watches=self.max_watches,
            max_watches_per_user=self.max_watches_per_user,
        )
