"""The local fleet's image pull failures: each cluster's KWOK refuses to "pull" the
images named for it, so a test can make one worker fail a workload for a worker-side
cause that another worker would not have.

A pod whose first container's image is ``fleet.jobrelay.dev/refused-on-<cluster>`` (with
or without the ``:latest`` tag) stays Pending on that cluster with its container waiting
in ``ErrImagePull``, as a kubelet that cannot pull it reports; on every other cluster it
runs as any pod does. The stages file is written per cluster: the shared stages
(kwok-stages.yaml) with their ``pod-ready`` stage leaving those images out, and one more
stage, ``pod-image-refused``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["REFUSED_IMAGE_PREFIX", "refused_images", "stages_for"]

REFUSED_IMAGE_PREFIX = "fleet.jobrelay.dev/refused-on-"
_IMAGE_KEY = ".spec.containers.[0].image"
_REFUSAL_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: Ready
  reason: ContainersNotReady
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: ContainersReady
  reason: ContainersNotReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    waiting:
      reason: ErrImagePull
      message: {{ printf "failed to pull image %q: pull access denied on this worker (local fleet)" .image | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
phase: Pending
"""


def refused_images(cluster: str) -> list[str]:
    """The images ``cluster``'s KWOK refuses to pull."""
    image = f"{REFUSED_IMAGE_PREFIX}{cluster}"
    return [image, f"{image}:latest"]


def _refusal_stage(images: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-image-refused"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": _IMAGE_KEY, "operator": "In", "values": images},
                    {
                        "key": ".status.containerStatuses.[0].state.waiting.reason",
                        "operator": "NotIn",
                        "values": ["ErrImagePull"],
                    },
                ]
            },
            "next": {"statusTemplate": _REFUSAL_TEMPLATE},
        },
    }


def stages_for(cluster: str, shared: Path) -> str:
    """The KWOK stages of ``cluster``: ``shared``'s, and its image refusals."""
    stages = [doc for doc in yaml.safe_load_all(shared.read_text()) if doc]
    images = refused_images(cluster)
    for stage in stages:
        if stage["metadata"]["name"] == "pod-ready":
            expressions = stage["spec"]["selector"]["matchExpressions"]
            expressions.append({"key": _IMAGE_KEY, "operator": "NotIn", "values": images})
    stages.append(_refusal_stage(images))
    return yaml.safe_dump_all(stages, sort_keys=False)
