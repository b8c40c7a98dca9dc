"""Shared sub-trees of cached objects (hash-consing), so that a held backlog of many
workloads made from few templates keeps each distinct pod template, label map or
container list once, not once per workload.

A cached object is decoded JSON: dicts, lists, strings, numbers, booleans and null.
:meth:`SharedTrees.share` returns an equal value whose dicts and lists are the one
canonical object per distinct content (keyed by the SHA-256 digest of its JSON
encoding, which tells ``1`` from ``1.0`` and ``true``, and keeps key order, so a shared
value is the very object it replaces, byte for byte) and whose short strings are
interned. A sub-tree over 64 KiB of JSON, and an object's status that says something,
are kept as decoded.

The table is bounded twice (entries, and bytes of the encodings they stand for) and
forgets the least recently used first: forgetting costs only sharing, never an
answer, and a canonical object lives only as long as some cached object or the table
holds it. Shared objects are read by many workloads at once: cached objects are
never changed in place (copy, then change the copy).
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from typing import Any, TypeVar, cast

import msgspec

__all__ = ["SHARED_TREES", "SharedTrees", "intern_text", "share_object"]

Shareable = TypeVar("Shareable")

# Strings up to this length are interned (keys, names, quantities, images); longer ones
# are rarely repeated outside a sub-tree that is shared whole.
_INTERNED_LENGTH = 96
# Metadata strings that many objects repeat (others, a name, a UID, a resourceVersion,
# are each object's own: interning them would only add a table entry).
_REPEATED_METADATA = frozenset({"namespace", "creationTimestamp", "generateName"})
# A sub-tree whose JSON is longer is kept as decoded, unshared: sharing it would encode
# and digest its bulk again at every level below (milliseconds for a workload of the
# largest size the admission policy lets in), and such bulk is rarely repeated.
_LARGEST_SHARED = 64 * 1024
_encode = msgspec.json.Encoder().encode


def _intern(text: str) -> str:
    # sys.intern of a str subclass raises; an exact str only (decoded JSON gives those).
    return sys.intern(text) if len(text) <= _INTERNED_LENGTH and type(text) is str else text


def _digest(encoded: bytes) -> bytes:
    # Cryptographic: two contents of one digest would hand one tenant's spec to another's
    # workload, so never Python's hash() (or MD5, SHA-1: collisions can be made). SHA-256
    # runs in hardware on most CPUs (about 2 us for a pod template's 3 KB).
    return hashlib.sha256(encoded).digest()


def intern_text(text: str) -> str:
    """``text`` interned when short (one object for every equal copy), else itself."""
    return _intern(text)


class SharedTrees:
    """A bounded table of canonical sub-trees: at most ``entries`` of them, standing for at
    most ``budget`` bytes of JSON between them (a sub-tree is counted once per level it
    is tabled at, so the bound is conservative). The bound is also what the table may
    keep alive once the workloads that used its objects are gone (in Python, two to
    three times their JSON): a few MiB, while a template in use is rarely forgotten."""

    def __init__(self, entries: int = 8_192, budget: int = 8 * 2**20) -> None:
        self._entries = entries
        self._budget = budget
        self._table: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._table)

    @property
    def tabled_bytes(self) -> int:
        """The bytes of JSON the tabled sub-trees stand for (nested ones counted again)."""
        return self._bytes

    def clear(self) -> None:
        self._table.clear()
        self._bytes = 0

    def share(self, value: Shareable) -> Shareable:
        """``value``, equal, with its dicts and lists the canonical ones and its short
        strings interned (``value`` itself is not changed). ``value`` is decoded JSON: a
        NaN or an infinity, which JSON cannot hold, would be encoded as null and shared
        with one."""
        if isinstance(value, str):
            return _intern(value)  # type: ignore[return-value]
        if not isinstance(value, dict | list):
            return value
        try:
            encoded = _encode(value)
        except (TypeError, ValueError, msgspec.EncodeError):
            return value  # not JSON: nothing decoded from the API; left as it is
        if len(encoded) > _LARGEST_SHARED:
            return value
        key = _digest(encoded)
        found = self._table.get(key)
        if found is not None:
            self._table.move_to_end(key)
            self.hits += 1
            return cast(Shareable, found[0])
        self.misses += 1
        canonical = self._rebuild(value)
        self._table[key] = (canonical, len(encoded))
        self._bytes += len(encoded)
        self._bound()
        return cast(Shareable, canonical)

    def share_encoded(self, value: Shareable) -> Shareable:
        """``value`` (any value msgspec encodes: a frozen dataclass of tuples, say) or an
        equal one already tabled, by its JSON encoding and its type: for read results
        that many workloads repeat, which are never changed in place."""
        try:
            encoded = _encode(value)
        except (TypeError, ValueError, msgspec.EncodeError):
            return value
        key = _digest(encoded + b"\0" + type(value).__qualname__.encode())
        found = self._table.get(key)
        if found is not None and type(found[0]) is type(value):
            self._table.move_to_end(key)
            self.hits += 1
            return found[0]
        self.misses += 1
        self._table[key] = (value, len(encoded))
        self._bytes += len(encoded)
        self._bound()
        return value

    def _bound(self) -> None:
        while len(self._table) > self._entries or self._bytes > self._budget:
            _key, (_dropped, size) = self._table.popitem(last=False)
            self._bytes -= size

    def _rebuild(self, value: dict[str, Any] | list[Any]) -> Any:
        if isinstance(value, dict):
            return {
                _intern(k) if isinstance(k, str) else k: self.share(v) for k, v in value.items()
            }
        return [self.share(item) for item in value]

    def share_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A whole object as cached: itself and its metadata rebuilt (its name, UID and
        resourceVersion are its own: no table entry would ever be shared), their fields
        shared; a status kept as it is unless empty (one that says something is the
        object's own, and changes with every event: looking it up would only cost)."""
        shared: dict[str, Any] = {}
        for k, v in obj.items():
            if k == "status" and v:
                shared[_intern(k)] = v
            elif k == "metadata" and isinstance(v, dict):
                shared[_intern(k)] = {
                    _intern(mk): mv
                    if isinstance(mv, str) and mk not in _REPEATED_METADATA
                    else self.share(mv)
                    for mk, mv in v.items()
                }
            else:
                shared[_intern(k)] = self.share(v)
        return shared


# The process's table: every informer's objects share one, so that a template used by
# several kinds' workloads (or the same Job seen by two caches) is kept once.
SHARED_TREES = SharedTrees()


def share_object(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as :data:`SHARED_TREES` shares it (:meth:`SharedTrees.share_object`)."""
    return SHARED_TREES.share_object(obj)
