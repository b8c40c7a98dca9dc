"""Each local cluster's KWOK refuses the images named for it, and only those."""

from __future__ import annotations

import yaml

from jobrelay.localfleet.cluster import KWOK_STAGES
from jobrelay.localfleet.image_refusals import REFUSED_IMAGE_PREFIX, refused_images, stages_for


def test_a_cluster_s_stages_refuse_its_images_and_run_the_rest() -> None:
    stages = {
        s["metadata"]["name"]: s for s in yaml.safe_load_all(stages_for("worker-1", KWOK_STAGES))
    }
    shared = [s for s in yaml.safe_load_all(KWOK_STAGES.read_text()) if s]
    assert set(stages) == {s["metadata"]["name"] for s in shared} | {"pod-image-refused"}
    images = [f"{REFUSED_IMAGE_PREFIX}worker-1", f"{REFUSED_IMAGE_PREFIX}worker-1:latest"]
    assert refused_images("worker-1") == images
    ready = stages["pod-ready"]["spec"]["selector"]["matchExpressions"]
    assert {"key": ".spec.containers.[0].image", "operator": "NotIn", "values": images} in ready
    refusal = stages["pod-image-refused"]["spec"]
    assert {"key": ".spec.containers.[0].image", "operator": "In", "values": images} in (
        refusal["selector"]["matchExpressions"]
    )
    assert "ErrImagePull" in refusal["next"]["statusTemplate"]
    assert "worker-1" not in stages_for("worker-2", KWOK_STAGES)
