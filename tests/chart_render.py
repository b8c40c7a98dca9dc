"""The chart as the tests render it: ``helm template`` of charts/jobrelay with given
values, parsed into objects. helm comes from ``jobrelay fleet build`` (the tests fail,
never skip, when it is missing)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.resolver import Tools, resolve_tools

REPO = Path(__file__).parents[1]
CHART = REPO / "charts" / "jobrelay"
KUBE_VERSION = "1.35.4"


def chart_tools() -> Tools:
    """helm 3 and 4 and the third-party CRDs, as `jobrelay fleet build` left them."""
    try:
        return resolve_tools(build=False)
    except BinaryError as error:
        pytest.fail(f"the chart tests need helm: {error}")


def helm_template_text(
    helm: Path,
    values: dict[str, Any],
    *,
    release: str = "jobrelay",
    namespace: str = "jobrelay-system",
    chart: Path = CHART,
    extra: tuple[str, ...] = (),
) -> str:
    """The YAML stream `helm template` prints for ``values`` (given as JSON on stdin)."""
    argv = [
        str(helm), "template", release, str(chart), "--namespace", namespace,
        "--kube-version", KUBE_VERSION, "--values", "-", *extra,
    ]  # fmt: skip
    result = subprocess.run(
        argv, input=json.dumps(values), capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stderr}"
    return result.stdout


def objects(text: str) -> list[dict[str, Any]]:
    """The objects of a YAML stream (empty documents left out)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render(helm: Path, values: dict[str, Any], **options: Any) -> list[dict[str, Any]]:
    return objects(helm_template_text(helm, values, **options))


def by_kind_and_name(rendered: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in rendered}
