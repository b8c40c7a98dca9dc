"""A small typed view over a raw object's ``metadata`` (kopf's ``Meta`` is the model).

Objects stay the raw dicts the apiserver sent, so no field is ever dropped;
``Meta(obj)`` only reads them, without copying, and tolerates missing or null
sections (``metadata: null``, ``annotations: null``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_EMPTY: Mapping[str, Any] = {}


class Meta:
    """Read-only accessors for ``obj["metadata"]``."""

    __slots__ = ("_metadata",)

    def __init__(self, obj: Mapping[str, Any] | None) -> None:
        metadata = (obj or _EMPTY).get("metadata")
        # Decoded JSON is plain dicts: the type test first, the slower ABC test for the rest.
        self._metadata: Mapping[str, Any] = (
            metadata if type(metadata) is dict or isinstance(metadata, Mapping) else _EMPTY
        )

    @property
    def raw(self) -> Mapping[str, Any]:
        """The metadata mapping itself (empty when the object has none)."""
        return self._metadata

    @property
    def name(self) -> str:
        return str(self._metadata.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self._metadata.get("namespace") or "")

    @property
    def key(self) -> str:
        """``namespace/name`` (``name`` alone for a cluster-scoped object)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def uid(self) -> str:
        return str(self._metadata.get("uid") or "")

    @property
    def resource_version(self) -> str:
        return str(self._metadata.get("resourceVersion") or "")

    @property
    def generation(self) -> int:
        generation = self._metadata.get("generation")
        return generation if isinstance(generation, int) else 0

    @property
    def creation_timestamp(self) -> str:
        return str(self._metadata.get("creationTimestamp") or "")

    @property
    def deletion_timestamp(self) -> str | None:
        stamp = self._metadata.get("deletionTimestamp")
        return str(stamp) if stamp else None

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def labels(self) -> Mapping[str, Any]:
        labels = self._metadata.get("labels")
        return labels if type(labels) is dict or isinstance(labels, Mapping) else _EMPTY

    @property
    def annotations(self) -> Mapping[str, Any]:
        annotations = self._metadata.get("annotations")
        if type(annotations) is dict or isinstance(annotations, Mapping):
            return annotations
        return _EMPTY

    @property
    def owner_references(self) -> list[Mapping[str, Any]]:
        owners = self._metadata.get("ownerReferences")
        if not isinstance(owners, list):
            return []
        return [owner for owner in owners if isinstance(owner, Mapping)]

    def label(self, key: str) -> str | None:
        value = self.labels.get(key)
        return None if value is None else str(value)

    def annotation(self, key: str) -> str | None:
        value = self.annotations.get(key)
        return None if value is None else str(value)

    def __repr__(self) -> str:
        return f"Meta({self.key or '?'})"


# The same reads as Meta's without a Meta: the relay asks them many times a reconcile
# (placements, mirror records, origin labels), where a wrapper each time shows.


def metadata_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """As ``Meta(obj).raw``."""
    metadata = (obj or _EMPTY).get("metadata")
    return metadata if type(metadata) is dict or isinstance(metadata, Mapping) else _EMPTY


def _metadata_map(obj: Mapping[str, Any] | None, field: str) -> Mapping[str, Any]:
    """``metadata.<field>`` when both are mappings, else empty (a tenant may write anything)."""
    metadata = (obj or _EMPTY).get("metadata")
    if type(metadata) is not dict and not isinstance(metadata, Mapping):
        return _EMPTY
    found = metadata.get(field)
    return found if type(found) is dict or isinstance(found, Mapping) else _EMPTY


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """As ``Meta(obj).labels``."""
    return _metadata_map(obj, "labels")


def annotations_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """As ``Meta(obj).annotations``."""
    return _metadata_map(obj, "annotations")


def annotation_of(obj: Mapping[str, Any] | None, key: str) -> str | None:
    """As ``Meta(obj).annotation(key)``."""
    value = _metadata_map(obj, "annotations").get(key)
    return None if value is None else str(value)


def uid_of(obj: Mapping[str, Any] | None) -> str:
    """As ``Meta(obj).uid``."""
    return str(metadata_of(obj).get("uid") or "")


def with_annotations(obj: Mapping[str, Any], annotations: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``obj`` with ``annotations`` laid over its own (None values kept)."""
    metadata = dict(Meta(obj).raw)
    metadata["annotations"] = {**Meta(obj).annotations, **annotations}
    return {**obj, "metadata": metadata}
