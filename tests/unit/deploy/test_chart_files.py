"""The chart's files that are copies or descriptions of something else stay in step:
the WorkerCluster and RelayQueue CRDs (crds/ = the package's copies, which `--install-crds` applies), the
values schema and the README's values table (both name every value of values.yaml)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from jobrelay.fleet import relayqueues, workerclusters

REPO = Path(__file__).parents[3]
CHART = REPO / "charts" / "jobrelay"
PACKAGE_CRD = REPO / "src" / "jobrelay" / "fleet" / "workercluster-crd.yaml"
PACKAGE_QUEUE_CRD = REPO / "src" / "jobrelay" / "fleet" / "relayqueue-crd.yaml"


def test_the_charts_crds_are_the_packages_byte_for_byte() -> None:
    copies = {
        "workerclusters.jobrelay.dev.yaml": (PACKAGE_CRD, workerclusters.crd_manifest()),
        "relayqueues.jobrelay.dev.yaml": (PACKAGE_QUEUE_CRD, relayqueues.crd_manifest()),
    }
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(copies)
    for name, (package_crd, manifest) in copies.items():
        chart_crd = CHART / "crds" / name
        assert chart_crd.read_bytes() == package_crd.read_bytes(), (
            f"cp {package_crd.relative_to(REPO)} {chart_crd.relative_to(REPO)} "
            "(and add a CRDs note to CHANGELOG.md)"
        )
        assert yaml.safe_load(chart_crd.read_text()) == manifest


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
