"""The chart tests' third-party CRDs, read out of a module zip, and the cache that holds
them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.chart_crds import CHART_CRD_SOURCES, chart_crds, crds_from_zip

MODULE, VERSION = "example.com/operator", "v1.2.3"
CRD = """\
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %s}
"""


def module_zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{MODULE}@{VERSION}/{name}", text)
    return path


def test_the_crds_of_the_files_named_in_that_order(tmp_path: Path) -> None:
    archive = module_zip(
        tmp_path / "m.zip",
        {"crds/b.yaml": CRD % "b.example.com", "crds/a.yaml": CRD % "a.example.com"},
    )
    found = crds_from_zip(archive, MODULE, VERSION, ("crds/a.yaml", "crds/b.yaml"))
    assert [crd["metadata"]["name"] for crd in found] == ["a.example.com", "b.example.com"]


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"crds/a.yaml": CRD % "a"}, "does not hold the CRDs"),  # crds/b.yaml missing
        ({"crds/a.yaml": CRD % "a", "crds/b.yaml": "kind: ConfigMap\n"}, "2 CRD files gave 1"),
        ({"crds/a.yaml": CRD % "a", "crds/b.yaml": "{{ .Values }}: [\n"}, "does not hold"),
    ],
)
def test_a_zip_without_them_is_one_clear_error(
    tmp_path: Path, files: dict[str, str], says: str
) -> None:
    archive = module_zip(tmp_path / "m.zip", files)
    with pytest.raises(BinaryError, match=says):
        crds_from_zip(archive, MODULE, VERSION, ("crds/a.yaml", "crds/b.yaml"))


def test_the_cache_is_used_and_an_empty_one_says_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path))
    with pytest.raises(BinaryError, match="run `jobrelay fleet build`"):
        chart_crds(print, build=False)
    (tmp_path / "crds").mkdir()
    tag = "-".join(version for _module, version, _files in CHART_CRD_SOURCES)
    cached = tmp_path / "crds" / f"chart-crds-{tag}.json"
    cached.write_text(json.dumps([]))
    assert chart_crds(print, build=False) == cached
