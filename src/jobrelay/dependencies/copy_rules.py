"""What jobrelay copies of a workload's ConfigMaps, Secrets and ServiceAccount onto a
worker, and how it recognises its copies there. Pure.

The objects a workload's pod templates name are found by :mod:`kinds.references`;
this module says, for one of them:

- what is copied (:func:`content_of`): a ConfigMap's ``data`` and ``binaryData``, a
  Secret's ``type`` and ``data``, a ServiceAccount's ``automountServiceAccountToken``;
  never labels, annotations, owners, a ServiceAccount's ``secrets`` or
  ``imagePullSecrets`` (its RBAC, bound on the manager, does not follow either);
- its digest and size (what the caches keep: never a whole Secret in memory);
- why it is never copied (:func:`refusal`): a ServiceAccount token Secret (a credential
  of the manager), or content over Kubernetes' 1 MiB object limit;
- the copy's body (:func:`copy_body`): the content and jobrelay's marks (a copy label
  and the origin, the source's UID, the digest); no owner references: one per mirror
  made every new mirror rewrite the whole copy (a 1 MiB Secret shared by 2,000 Jobs
  was 2 GiB of writes, and the list outgrew the object limit). A copy is written
  when its content changes, never because another mirror uses it;
- whether a copy is still used on its worker (:func:`in_use`, from the mirrors that
  exist and the workloads placed there: never from memory, so a restart loses
  nothing), and which unused copies have stayed unused long enough to be deleted
  (:func:`settled_unused`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from jobrelay.dependencies.template_references import Dependency, DependencyKind
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    COPY_LABEL,
    DIGEST_ANNOTATION,
    ORIGIN_LABEL,
    SOURCE_UID_ANNOTATION,
    controller_label_value,
)
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "MAX_CONTENT_BYTES",
    "RESOURCES",
    "SERVICE_ACCOUNT_TOKEN",
    "Copy",
    "CopyUser",
    "Source",
    "content_of",
    "copy_body",
    "copy_of",
    "digest",
    "in_use",
    "is_our_copy",
    "refusal",
    "settled_unused",
    "slim_copy",
    "slim_source",
    "source_of",
]

RESOURCES: Mapping[DependencyKind, Resource] = {
    "configmap": Resource("", "v1", "configmaps", "ConfigMap", namespaced=True),
    "secret": Resource("", "v1", "secrets", "Secret", namespaced=True),
    "serviceaccount": Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True),
}
# Kubernetes refuses a ConfigMap or Secret whose content exceeds 1 MiB.
MAX_CONTENT_BYTES = 1024 * 1024
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_of(kind: DependencyKind, obj: JsonObj) -> JsonObj:
    """What a copy of ``obj`` carries of it: nothing else of the source ever reaches a worker."""
    content: JsonObj = {}
    if kind == "configmap":
        for field in ("data", "binaryData"):
            if _dict(obj.get(field)):
                content[field] = dict(obj[field])
    elif kind == "secret":
        if isinstance(obj.get("type"), str):
            content["type"] = obj["type"]
        if _dict(obj.get("data")):
            content["data"] = dict(obj["data"])
    elif isinstance(obj.get("automountServiceAccountToken"), bool):
        content["automountServiceAccountToken"] = obj["automountServiceAccountToken"]
    return content


def digest(content: JsonObj) -> str:
    """A short, stable digest of copied content (key order does not matter)."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _size(content: JsonObj) -> int:
    """Bytes of data as Kubernetes counts them against its limit (keys and values; a
    Secret's and a binaryData value decoded from base64)."""
    total = 0
    for field in ("data", "binaryData"):
        for key, value in _dict(content.get(field)).items():
            total += len(str(key).encode())
            text = str(value)
            if field == "binaryData" or "type" in content:
                # base64: 4 characters carry 3 bytes, less the padding
                total += (len(text) * 3) // 4 - text[-2:].count("=")
            else:
                total += len(text.encode())
    return total


@dataclass(frozen=True, slots=True)
class Source:
    """A dependency as the manager has it: what the caches keep of it."""

    uid: str
    digest: str
    size: int
    # A Secret's type ("" otherwise).
    type: str = ""


def slim_source(kind: DependencyKind) -> Any:
    """The manager's informer transform for one kind: name, namespace, uid, version, and
    the digest, size and type of what would be copied (never the data itself)."""

    def transform(obj: JsonObj) -> JsonObj:
        meta = Meta(obj)
        content = content_of(kind, obj)
        return {
            "metadata": {
                "name": meta.name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "resourceVersion": meta.resource_version,
            },
            "digest": digest(content),
            "size": _size(content),
            "type": str(content.get("type") or ""),
        }

    return transform


def source_of(slim: JsonObj | None) -> Source | None:
    """A slimmed source (see :func:`slim_source`) as a :class:`Source`."""
    if slim is None:
        return None
    return Source(
        uid=Meta(slim).uid,
        digest=str(slim.get("digest") or ""),
        size=int(slim.get("size") or 0),
        type=str(slim.get("type") or ""),
    )


def refusal(dependency: Dependency, source: Source) -> tuple[str, str] | None:
    """Why this source is never copied: (the Event's reason, what it says after the
    dependency's name); None when it may be."""
    if dependency.kind == "secret" and source.type == SERVICE_ACCOUNT_TOKEN:
        return (
            "DependencyRefused",
            "is a ServiceAccount token Secret: a credential of the management cluster is "
            "never copied to a worker",
        )
    if source.size > MAX_CONTENT_BYTES:
        return (
            "DependencyTooLarge",
            f"holds {source.size} bytes, over Kubernetes' {MAX_CONTENT_BYTES}-byte limit",
        )
    return None


def is_our_copy(obj: JsonObj | None, controller_name: str, origin: str) -> bool:
    """Whether a worker object carries this controller's and origin's copy marks."""
    labels = Meta(obj).labels
    return (
        labels.get(COPY_LABEL) == controller_label_value(controller_name)
        and labels.get(ORIGIN_LABEL) == origin
    )


def copy_body(
    dependency: Dependency, source: JsonObj, *, controller_name: str, origin: str
) -> JsonObj:
    """The worker object copying ``source`` (the manager's, read whole): its content and
    our marks; no owners (its lifetime is the copy janitor's, controller/copy_sweep.py)."""
    ref = RESOURCES[dependency.kind]
    meta = Meta(source)
    content = content_of(dependency.kind, source)
    metadata: JsonObj = {
        "name": meta.name,
        "namespace": meta.namespace,
        "labels": {COPY_LABEL: controller_label_value(controller_name), ORIGIN_LABEL: origin},
        "annotations": {SOURCE_UID_ANNOTATION: meta.uid, DIGEST_ANNOTATION: digest(content)},
    }
    return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": metadata, **content}


@dataclass(frozen=True, slots=True)
class Copy:
    """Our copy on a worker, as its cache keeps it."""

    uid: str
    digest: str
    # The UIDs of the mirrors that own it: only copies made before issue 33 have any
    # (the worker's garbage collector still removes those with their last mirror).
    owners: frozenset[str]
    created: str = ""


def slim_copy(obj: JsonObj) -> JsonObj:
    """A worker's copy as its cache keeps it: metadata (owners, our marks, the digest)."""
    meta = Meta(obj)
    annotations = meta.annotations
    return {
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
            "creationTimestamp": meta.creation_timestamp,
            "labels": {k: v for k, v in meta.labels.items() if k in (COPY_LABEL, ORIGIN_LABEL)},
            "annotations": {
                k: v
                for k, v in annotations.items()
                if k in (DIGEST_ANNOTATION, SOURCE_UID_ANNOTATION)
            },
            "ownerReferences": [
                {k: o.get(k) for k in ("apiVersion", "kind", "name", "uid")}
                for o in meta.owner_references
            ],
        }
    }


def copy_of(slim: JsonObj | None) -> Copy | None:
    if slim is None:
        return None
    meta = Meta(slim)
    return Copy(
        uid=meta.uid,
        digest=str(meta.annotations.get(DIGEST_ANNOTATION) or ""),
        owners=frozenset(str(o.get("uid")) for o in meta.owner_references),
        created=meta.creation_timestamp,
    )


# -- how long a copy lives ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CopyUser:
    """A workload whose pod templates name a copy's source, as it stands toward the
    copy's worker."""

    # Its mirror is in that worker's cache.
    mirrored_here: bool
    # The manager's object is placed on that worker now (its mirror may be on its way).
    placed_here: bool
    # It finished: its mirror, if any, is about to go.
    finished: bool = False


def in_use(users: Iterable[CopyUser]) -> bool:
    """Whether a copy is still needed on its worker: a mirror there uses it, or a
    workload placed there and not finished will (its mirror is being created)."""
    return any(u.mirrored_here or (u.placed_here and not u.finished) for u in users)


_Copy = TypeVar("_Copy", bound=Hashable)


def settled_unused(
    unused: Iterable[_Copy], since: Mapping[_Copy, float], now: float, settle: float
) -> tuple[list[_Copy], dict[_Copy, float]]:
    """Of the copies found unused now, those unused since ``settle`` seconds ago at least
    (to delete), and since when each one found unused now has been (the next call's
    ``since``): a copy used again, or not looked at, starts over. A copy is never deleted
    on one look alone (a cache may not show yet the mirror or placement that uses it)."""
    seen = {copy: since.get(copy, now) for copy in unused}
    return [copy for copy, first in seen.items() if now - first >= settle], seen
