"""What a controller that is starting does not know yet: typed, so that no one compares
words to tell it apart from a refusal. Pure.

Placement's filters say why a cluster cannot take a workload in words (a ``str``);
the one reason that is no refusal but a moment's wait (an informer has not listed
yet) is a :class:`NotKnownYet`. It reads like any other reason in an explanation,
and ``isinstance(reason, NotKnownYet)`` tells it apart.
"""

from __future__ import annotations

import enum

__all__ = ["NotKnownYet"]


class NotKnownYet(enum.StrEnum):
    """Why a cluster is passed over for now: what placement needs of it has not been read
    yet. Its value is what the explanation says."""

    CAPACITY = "capacity not known yet"
    NAMESPACES = "its namespaces are not known yet"
    CLAIMS = "its PersistentVolumeClaims are not known yet"
