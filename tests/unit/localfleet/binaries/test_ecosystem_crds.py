"""The ecosystem's CRDs: the files named in each module zip, and the cache that holds
them (an empty one says to build, never a skip)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.ecosystem_crds import (
    ECOSYSTEM_CRD_SOURCES,
    ecosystem_crds,
    ecosystem_crds_path,
    load_ecosystem_crds,
)


def test_each_kind_comes_from_its_module_and_pytorch_alone_from_the_training_operator() -> None:
    files = {module: names for module, _version, names in ECOSYSTEM_CRD_SOURCES}
    assert files["github.com/ray-project/kuberay/ray-operator"] == (
        "config/crd/bases/ray.io_rayjobs.yaml", "config/crd/bases/ray.io_rayclusters.yaml",
    )  # fmt: skip
    assert files["github.com/kubeflow/training-operator"] == (
        "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
    )
    assert [v for _m, v, _f in ECOSYSTEM_CRD_SOURCES] == ["v1.5.0", "v2.0.0", "v1.9.0", "v0.7.0"]


def test_the_cache_is_used_and_an_empty_one_says_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path))
    with pytest.raises(BinaryError, match="run `jobrelay fleet build`"):
        ecosystem_crds(print, build=False)
    cached = ecosystem_crds_path()
    assert cached.parent == tmp_path / "crds"
    cached.parent.mkdir()
    cached.write_text(json.dumps([{"kind": "CustomResourceDefinition", "metadata": {}}]))
    assert ecosystem_crds(print, build=False) == cached
    assert load_ecosystem_crds(cached)[0]["kind"] == "CustomResourceDefinition"


@pytest.mark.parametrize("text", ["{", "{}", '[{"kind": "ConfigMap"}]'])
def test_a_file_that_is_not_a_list_of_crds_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "crds.json"
    path.write_text(text)
    with pytest.raises(BinaryError, match=r"crds\.json"):
        load_ecosystem_crds(path)
