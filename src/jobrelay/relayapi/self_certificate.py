"""The serving certificate the controller makes, publishes and renews itself
(``--api-cert-secret``; the rules and why in ``self_certificate_rules.py``).

Every replica, at start, reads the Secret, or creates it when absent (a 409 means
another replica was first: its Secret is read), and then follows it with an informer
of that one Secret, serving each renewed certificate from the next handshake on. The
leader, every ``--api-cert-reload-interval`` (``controller/http_serving.py``), renews
what is due and writes the CA into the caBundle of the APIService and of the managedBy
webhook configuration (that one field, as its own field manager), and reads the
APIService's Available condition.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import API_SERVICES, MUTATING_WEBHOOK_CONFIGURATIONS, SECRETS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from jobrelay.relayapi.self_certificate_rules import (
    CA_BUNDLE_FIELD_MANAGER,
    Renewal,
    ServingMaterial,
    api_service_available,
    api_service_ca_bundle,
    ca_bundle_of,
    renewal,
    webhook_ca_bundle,
    webhooks_lacking,
)
from jobrelay.vocabulary.names import FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource
from jobrelay.web.tls import certificate_authority, signed_serving_certificate

__all__ = ["CertificateLifetimes", "SelfCertificate", "api_service_availability"]

_log = logging.getLogger(__name__)
_LABELS = {"app.kubernetes.io/name": "jobrelay", "app.kubernetes.io/component": "api"}


@dataclass(frozen=True)
class CertificateLifetimes:
    """How long the CA and the serving certificate it signs are made to last."""

    authority: datetime.timedelta = datetime.timedelta(days=3650)
    serving: datetime.timedelta = datetime.timedelta(days=365)


@dataclass
class SelfCertificate:
    """Secret ``namespace/secret``: made, followed, renewed; its CA injected."""

    manager: ApiClient
    namespace: str
    secret: str
    hosts: Sequence[str]
    lifetimes: CertificateLifetimes = field(default_factory=CertificateLifetimes)
    # The MutatingWebhookConfiguration whose webhooks get the caBundle ("" none).
    webhook_configuration: str = ""
    # The APIService's Available condition as the leader last read it (None: unread).
    api_service_available: bool | None = None
    _informer: Informer | None = None

    def fresh(self, keep_authority: ServingMaterial | None = None) -> ServingMaterial:
        """New material: a serving certificate signed by ``keep_authority``'s CA, or a
        new CA too."""
        if keep_authority is None:
            ca_pem, ca_key_pem = certificate_authority("jobrelay-api-ca", self.lifetimes.authority)
        else:
            ca_pem, ca_key_pem = keep_authority.ca_pem, keep_authority.ca_key_pem
        cert_pem, key_pem = signed_serving_certificate(
            ca_pem, ca_key_pem, self.hosts, self.lifetimes.serving
        )
        return ServingMaterial(ca_pem, ca_key_pem, cert_pem, key_pem)

    async def _stored(self) -> dict[str, Any] | None:
        """The Secret as stored, None when there is none."""
        try:
            found: dict[str, Any] = await self.manager.get(
                SECRETS, self.secret, namespace=self.namespace
            )
        except ApiError as error:
            if error.is_not_found:
                return None
            raise
        return found

    async def load(self) -> ServingMaterial:
        """The Secret's material, created first when there is none (every replica at start:
        a 409 means another was first, and its Secret is read); an unusable one (a key
        missing) is replaced."""
        for _attempt in range(5):
            stored = await self._stored()
            material = ServingMaterial.from_secret(stored)
            if material is not None:
                return material
            material = self.fresh()
            try:
                await self._write(material, stored)
            except ApiError as error:
                if error.is_already_exists or error.is_conflict:
                    continue  # another replica wrote it first: read theirs
                raise
            _log.info("made the API's serving certificate and CA in Secret %s/%s",
                      self.namespace, self.secret, extra={"event": "api-certificate-made"})  # fmt: skip
            return material
        raise ValueError(f"Secret {self.namespace}/{self.secret} kept changing while read")

    async def _write(self, material: ServingMaterial, stored: dict[str, Any] | None) -> None:
        body = material.secret(self.namespace, self.secret, _LABELS)
        if stored is None:
            await self.manager.create(SECRETS, body, field_manager=FIELD_MANAGER)
            return
        metadata = stored.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        body["metadata"]["resourceVersion"] = version  # a concurrent renewal conflicts
        await self.manager.replace(SECRETS, body, field_manager=FIELD_MANAGER)

    def follow(self, serve: Callable[[ServingMaterial], None]) -> None:
        """Call ``serve`` with each material the Secret holds from now on (an informer of
        this one Secret)."""
        informer = Informer(
            self.manager, SECRETS, namespace=self.namespace,
            field_selector=f"metadata.name={self.secret}",
        )  # fmt: skip
        key = f"{self.namespace}/{self.secret}"

        def changed(_event: InformerEvent) -> None:
            material = ServingMaterial.from_secret(informer.get(key))
            if material is not None:
                serve(material)

        informer.add_handler(changed)
        informer.start()
        self._informer = informer

    async def stop(self) -> None:
        if self._informer is not None:
            await self._informer.stop()

    async def check(self, now: datetime.datetime) -> ServingMaterial | None:
        """Renew what is due at ``now``, inject the CA where it is not, read the
        APIService; an apiserver's refusal is logged and tried again next time."""
        try:
            material = await self.renew(now)
            await self._inject(material)
        except ApiError as error:
            _log.warning("cannot keep the API's certificate in Secret %s/%s: %s %s",
                         self.namespace, self.secret, error.reason, error.message)  # fmt: skip
            return None
        return material

    async def renew(self, now: datetime.datetime) -> ServingMaterial:
        """The Secret's material, renewed first when due at ``now`` (a conflict with another
        writer raises: the next check reads theirs)."""
        stored = await self._stored()
        material = ServingMaterial.from_secret(stored)
        due = renewal(material, self.hosts, now)
        if due is Renewal.NONE and material is not None:
            return material
        renewed = self.fresh(material if due is Renewal.SERVING else None)
        await self._write(renewed, stored)
        _log.info(
            "renewed the API's serving certificate%s in Secret %s/%s",
            " and its CA" if due is Renewal.AUTHORITY else "", self.namespace, self.secret,
            extra={"event": "api-certificate-renewed"},
        )  # fmt: skip
        return renewed

    async def _inject(self, material: ServingMaterial) -> None:
        bundle = material.ca_bundle
        registration = await _api_service(self.manager)
        if registration is not None and ca_bundle_of(registration) != bundle:
            registration = await self._apply(API_SERVICES, API_SERVICE_NAME,
                                             api_service_ca_bundle(bundle))  # fmt: skip
        self.api_service_available = api_service_available(registration)
        if not self.webhook_configuration:
            return
        try:
            webhooks = await self.manager.get(
                MUTATING_WEBHOOK_CONFIGURATIONS, self.webhook_configuration
            )
        except ApiError as error:
            if not error.is_not_found:
                raise
            return
        if webhooks_lacking(webhooks, bundle):
            # Every webhook named: one left out of an apply would lose the field.
            names = [w["name"] for w in webhooks.get("webhooks") or []]
            await self._apply(MUTATING_WEBHOOK_CONFIGURATIONS, self.webhook_configuration,
                              webhook_ca_bundle(self.webhook_configuration, names, bundle))  # fmt: skip

    async def _apply(self, resource: Resource, name: str, body: dict[str, Any]) -> dict[str, Any]:
        written = await self.manager.patch(
            resource, name, body, patch_type=PatchType.APPLY,
            field_manager=CA_BUNDLE_FIELD_MANAGER, force=True,
        )  # fmt: skip
        _log.info("wrote the API's CA into the caBundle of %s %s", resource.kind, name,
                  extra={"event": "api-ca-injected"})  # fmt: skip
        return written


async def _api_service(manager: ApiClient) -> dict[str, Any] | None:
    try:
        return await manager.get(API_SERVICES, API_SERVICE_NAME)
    except ApiError as error:
        if error.is_not_found:
            return None
        raise


async def api_service_availability(manager: ApiClient) -> bool | None:
    """APIService v1alpha1.api.jobrelay.dev's Available condition (None: not there, no
    condition, or not read: the refusal is logged)."""
    try:
        return api_service_available(await _api_service(manager))
    except ApiError as error:
        _log.warning("cannot read APIService %s: %s %s", API_SERVICE_NAME, error.reason,
                     error.message)  # fmt: skip
        return None
