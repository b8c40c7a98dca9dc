"""Both charts refuse, at render, a kind that needs a managedBy value it lacks (issue 35):
`helm template` fails with one message naming the value to write, the same the controller
would refuse to start without (kinds/managed_by_claims.py claim_problem). The charts' table
of such kinds is checked here against every dedicated adapter's crd_managed_by_values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kinds.managed_by_claims import MULTIKUEUE, claim_problem
from tests.chart_render import CHART, KUBE_VERSION, REPO, chart_tools

pytestmark = pytest.mark.integration

WORKER_CHART = REPO / "charts" / "jobrelay-worker"
CONTROLLER_NAME = "jobrelay.dev/relay"


def _template(chart: Path, kinds: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    values = {"kinds": kinds, **({"origin": "manager-uid"} if chart == WORKER_CHART else {})}
    return subprocess.run(
        [str(chart_tools().helm), "template", "r", str(chart), "--kube-version", KUBE_VERSION,
         "--values", "-"],
        input=json.dumps(values), capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("chart", [CHART, WORKER_CHART], ids=["jobrelay", "jobrelay-worker"])
def test_a_kind_needing_a_value_fails_the_render_naming_it(chart: Path) -> None:
    for name, kind in DEDICATED.items():
        if not kind.crd_managed_by_values:
            assert _template(chart, [{"name": name}]).returncode == 0, name
            continue
        # The controller refuses its default value and names the one to write: so does the chart.
        assert claim_problem(kind, CONTROLLER_NAME) is not None
        assert claim_problem(kind, MULTIKUEUE) is None
        write = f"write {{name: {name}, managedBy: {MULTIKUEUE}}}"
        for given in ({"name": name}, {"name": name, "managedBy": kind.crd_managed_by_values[0]}):
            refused = _template(chart, [{"name": "Job.v1.batch"}, given])
            assert refused.returncode != 0, f"{chart.name}: {given} rendered"
            lines = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
            assert len(lines) == 1 and write in lines[0], refused.stderr
        rendered = _template(chart, [{"name": name, "managedBy": MULTIKUEUE}])
        assert rendered.returncode == 0, rendered.stderr
