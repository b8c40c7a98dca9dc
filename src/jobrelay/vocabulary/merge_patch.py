"""JSON merge patches (RFC 7386) computed from two documents."""

from __future__ import annotations

from typing import Any

from jobrelay.vocabulary.json_types import JsonObj


def merge_patch(old: JsonObj, new: JsonObj) -> JsonObj:
    """The merge patch that turns ``old`` into ``new``.

    Removed keys become ``None`` (JSON null); lists and scalars are replaced
    whole, objects are patched key by key. Empty when they are equal.
    """
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = value
    return patch


def apply_merge_patch(target: JsonObj, patch: JsonObj) -> JsonObj:
    """``target`` with ``patch`` applied, as the apiserver would (for tests and checks)."""
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            # An object merges into what is there (nothing, or not an object: {}), so
            # its own nulls remove nothing and are not stored (RFC 7386).
            current = result.get(key)
            result[key] = apply_merge_patch(current if isinstance(current, dict) else {}, value)
        else:
            result[key] = value
    return result
