"""The chart's files that describe something else stay in step (the values schema and the
README's values table both name every value of values.yaml), and the chart files the package
ships are the charts' own: links into charts/, never copies."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from jobrelay.fleet import relayqueues, workerclusters
from jobrelay.manifests import chart_sources

REPO = Path(__file__).parents[3]
CHART = REPO / "charts" / "jobrelay"
PACKAGE_MANIFESTS = REPO / "src" / "jobrelay" / "manifests"
SHIPPED = {
    chart_sources.WORKER_CLUSTER_CRD: CHART / "files" / "crds" / "workerclusters.jobrelay.dev.yaml",
    chart_sources.RELAY_QUEUE_CRD: CHART / "files" / "crds" / "relayqueues.jobrelay.dev.yaml",
    chart_sources.ADMISSION_POLICIES: CHART / "files" / "admission-policies.yaml",
    chart_sources.WORKER_ACCESS: REPO
    / "charts"
    / "jobrelay-worker"
    / "files"
    / "worker-access.yaml",
}


def test_the_package_ships_the_charts_files_through_links_not_copies() -> None:
    for name, chart_file in SHIPPED.items():
        shipped = PACKAGE_MANIFESTS / name
        assert shipped.is_symlink(), f"{shipped} must be a link to {chart_file}, not a copy"
        assert shipped.resolve() == chart_file.resolve(), name
    links = {p.name for p in PACKAGE_MANIFESTS.iterdir() if p.is_symlink()}
    assert links == set(SHIPPED), "a link in src/jobrelay/manifests/ that chart_sources lacks"


def test_every_crd_of_the_chart_is_one_the_package_reads() -> None:
    """The chart's files/crds/ holds exactly the CRDs the package reads (`run
    --install-crds`, `fleet up`), and the chart has no crds/ (Helm would never upgrade it)."""
    read = {workerclusters.crd_manifest()["metadata"]["name"],
            relayqueues.crd_manifest()["metadata"]["name"]}  # fmt: skip
    in_chart = {
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in (CHART / "files" / "crds").iterdir()
    }
    assert in_chart == read
    assert not (CHART / "crds").exists()


def test_each_crd_is_stored_once() -> None:
    """Issue 32: every jobrelay.dev CRD in the repository is a file of files/crds/ (the
    package's copies are links to it, the chart renders it)."""
    stored = subprocess.run(
        ["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    crds = []
    for line in stored:
        mode, path = line.split()[0], line.split("\t", 1)[1]
        if mode == "120000" or not path.endswith((".yaml", ".yml", ".json")):
            continue  # a link, or no manifest
        text = (REPO / path).read_text(errors="replace") if (REPO / path).is_file() else ""
        if "CustomResourceDefinition" in text and re.search(r"group: jobrelay\.dev\b", text):
            crds.append(path)
    assert sorted(crds) == sorted(
        str(p.relative_to(REPO)) for p in (CHART / "files" / "crds").iterdir()
    )


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys of values.yaml down to its leaves (maps meant as free-form, such as
    labels or resources, count as leaves)."""
    keys = []
    for key, value in values.items():
        path = prefix + key
        if isinstance(value, dict) and value and not _free_form(path):
            keys += _leaves(value, path + ".")
        else:
            keys.append(path)
    return keys


def _free_form(path: str) -> bool:
    return path.rsplit(".", 1)[-1] in {"resources", "labels", "annotations", "issuerRef"}


def _values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def test_the_schema_knows_every_value_and_refuses_others() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    for key in _leaves(_values()):
        node = schema
        for part in key.split("."):
            assert node.get("additionalProperties") is False, f"{key}: a typo would pass"
            assert part in node["properties"], f"values.schema.json does not know {key}"
            node = node["properties"][part]


def test_the_readme_documents_every_value() -> None:
    table = re.findall(r"^\| `([^`]+)` \|", (CHART / "README.md").read_text(), re.M)
    missing = [key for key in _leaves(_values()) if key not in table]
    assert not missing, f"charts/jobrelay/README.md's values table lacks {missing}"
