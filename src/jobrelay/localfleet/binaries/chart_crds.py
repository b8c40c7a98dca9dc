"""The third-party CRDs the chart's optional objects are checked against: the
Prometheus operator's ServiceMonitor, PodMonitor and PrometheusRule, and cert-manager's
Certificate and issuers, read out of their Go module zips and kept as one JSON file."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import yaml

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root
from jobrelay.localfleet.binaries.gomodule import download_module, find_go
from jobrelay.localfleet.binaries.versions import (
    CERT_MANAGER_MODULE,
    CERT_MANAGER_VERSION,
    PROMETHEUS_OPERATOR_MODULE,
    PROMETHEUS_OPERATOR_VERSION,
)

# (module, version, the CRD files in its zip): plain CustomResourceDefinitions, no templates.
CHART_CRD_SOURCES = (
    (
        PROMETHEUS_OPERATOR_MODULE,
        PROMETHEUS_OPERATOR_VERSION,
        tuple(
            f"example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml"
            for plural in ("servicemonitors", "podmonitors", "prometheusrules")
        ),
    ),
    (
        CERT_MANAGER_MODULE,
        CERT_MANAGER_VERSION,
        tuple(
            f"deploy/crds/cert-manager.io_{plural}.yaml"
            for plural in ("certificates", "certificaterequests", "issuers", "clusterissuers")
        ),
    ),
)

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crds_from_zip(
    archive_path: Path, module: str, version: str, files: tuple[str, ...]
) -> list[Any]:
    """The CustomResourceDefinitions of ``files`` in a module zip, in that order."""
    root = f"{module}@{version}/"
    found = []
    try:
        with zipfile.ZipFile(archive_path) as archive:
            for name in files:
                for document in yaml.load_all(archive.read(root + name), Loader=_YAML_LOADER):
                    if document and document.get("kind") == "CustomResourceDefinition":
                        found.append(document)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, yaml.YAMLError) as error:
        raise BinaryError(
            f"{archive_path} does not hold the CRDs jobrelay expects: {error!r}"
        ) from error
    if len(found) != len(files):
        raise BinaryError(f"{archive_path}: {len(files)} CRD files gave {len(found)} CRDs")
    return found


def chart_crds(progress: Progress, *, build: bool) -> Path:
    """The JSON file (a list) of the third-party CRDs, downloading them when missing and
    ``build``."""
    tag = "-".join(version for _module, version, _files in CHART_CRD_SOURCES)
    destination = cache_root() / "crds" / f"chart-crds-{tag}.json"
    return cached_crds(
        progress, build=build, destination=destination, sources=CHART_CRD_SOURCES,
        what="the chart tests' CRDs", workspace="chart-crds",
    )  # fmt: skip


def cached_crds(
    progress: Progress,
    *,
    build: bool,
    destination: Path,
    sources: tuple[tuple[str, str, tuple[str, ...]], ...],
    what: str,
    workspace: str,
) -> Path:
    """``destination``, a JSON list of the CRDs of ``sources`` (module, version, files),
    downloaded through the Go module proxy when missing and ``build``."""
    if destination.is_file():
        return destination
    if not build:
        raise BinaryError(f"{what} are not in {destination.parent} yet: run `jobrelay fleet build`")
    with build_lock():
        if not destination.is_file():
            go = find_go(what, "nothing: they come from the Go module proxy")
            directory = cache_root() / "build" / workspace
            directory.mkdir(parents=True, exist_ok=True)
            crds: list[Any] = []
            for module, version, files in sources:
                progress(f"downloading the CRDs of {module}@{version} ...")
                info = download_module(go, module, version, directory)
                crds += crds_from_zip(Path(info["Zip"]), module, version, files)
            destination.parent.mkdir(parents=True, exist_ok=True)
            temporary = destination.with_suffix(".tmp")
            temporary.write_text(json.dumps(crds, separators=(",", ":")))
            temporary.replace(destination)
    return destination
