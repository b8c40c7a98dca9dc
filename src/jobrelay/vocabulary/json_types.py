"""The one type the pure Job logic speaks: a JSON object as decoded from an apiserver."""

from __future__ import annotations

from typing import Any, TypeAlias

# Objects stay plain dicts (the shape the apiserver sends and accepts) so the
# pure core never depends on a client library's models.
JsonObj: TypeAlias = dict[str, Any]
