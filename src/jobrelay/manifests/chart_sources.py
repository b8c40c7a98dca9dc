"""The Helm charts' files the package ships, read where the charts keep them.

The charts are the one source of jobrelay's install manifests. The files the package needs
too are symbolic links in this package's directory into ``charts/``: the two CRDs
(``charts/jobrelay/files/crds/``, which the chart's ``templates/crds.yaml`` renders and
which `run --install-crds` and `fleet up` apply as an admin would; the CLI's verbs only
check that they are served) and the data of the manifests the CLI prints or applies
(``charts/jobrelay/files/admission-policies.yaml``,
``charts/jobrelay-worker/files/worker-access.yaml``). A checkout and an editable install
follow the links; building the sdist and the wheel copies the files in (docs/development.md,
"One source for each manifest").

Those data files hold objects with ``$(name)`` placeholders; :func:`fill` replaces them as
the charts' ``fill`` helpers do.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "ADMISSION_POLICIES",
    "RELAY_QUEUE_CRD",
    "WORKER_ACCESS",
    "WORKER_CLUSTER_CRD",
    "chart_document",
    "fill",
]

# charts/jobrelay/files/crds/: the chart's templates/crds.yaml renders them.
WORKER_CLUSTER_CRD = "workerclusters.jobrelay.dev.yaml"
RELAY_QUEUE_CRD = "relayqueues.jobrelay.dev.yaml"
# charts/jobrelay/files/ and charts/jobrelay-worker/files/: the templates' data.
ADMISSION_POLICIES = "admission-policies.yaml"
WORKER_ACCESS = "worker-access.yaml"

_HERE = Path(__file__).parent
_PLACEHOLDER = re.compile(r"\$\(([A-Za-z]+)\)")


@functools.cache
def _text(name: str) -> str:
    return (_HERE / name).read_text()


def chart_document(name: str) -> dict[str, Any]:
    """The YAML document of the shipped chart file ``name`` (a fresh copy: callers fill it)."""
    loaded: dict[str, Any] = yaml.safe_load(_text(name))
    return loaded


def fill(data: Any, values: Mapping[str, str]) -> Any:
    """``data`` with every ``$(key)`` in its strings replaced by ``values[key]``, verbatim and
    in one pass (a value is never read for placeholders); an unknown key is a KeyError."""
    if isinstance(data, str):
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], data)
    if isinstance(data, list):
        return [fill(item, values) for item in data]
    if isinstance(data, dict):
        return {fill(key, values): fill(value, values) for key, value in data.items()}
    return data
