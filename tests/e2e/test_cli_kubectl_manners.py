"""The CLI's kubectl manners against the real fleet and controller: `jobrelay version` reads
the server's version and kinds from the leader's Lease, and `get`/`describe` see a generic
kind the controller runs (Sleeper, from test_generic_kind) by its kubectl names.

Every command runs as a child process (``python -m jobrelay``), as a user runs it."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from jobrelay import __version__ as VERSION
from tests.e2e.support import Relay
from tests.e2e.test_generic_kind import (  # the Sleeper kind's fixtures, reused
    CONTROLLER_ARGS,
    GROUP,
    _sleeper_controllers_healthy,
    sleeper_kind,
    sleeper_manifest,
    sleepers,
)
from tests.kubetools import eventually
from tests.kubetools import jobrelay_cli as jobrelay

if TYPE_CHECKING:
    from tests.conftest import FleetHandle
    from tests.e2e.support import ControllerProcess

pytestmark = pytest.mark.e2e
__all__ = ["CONTROLLER_ARGS", "_sleeper_controllers_healthy", "sleeper_kind", "sleepers"]


async def test_version_reads_the_leaders_version_and_kinds(
    controller: ControllerProcess, fleet: FleetHandle
) -> None:
    manager = fleet.kubeconfig("manager")

    async def recorded() -> dict[str, Any] | None:
        code, out, _ = await jobrelay(manager, "version", "-o", "json")
        answer: dict[str, Any] = json.loads(out) if code == 0 else {}
        return answer if (answer.get("serverVersion") or {}).get("version") else None

    answer = await eventually(recorded, timeout=60)
    assert answer["clientVersion"] == {"version": VERSION}
    server = answer["serverVersion"]
    assert server["version"] == VERSION
    assert server["lease"] == "jobrelay-system/jobrelay-relay"
    assert server["kinds"] == ["Job.v1.batch", f"Sleeper.v1.{GROUP}"]
    assert server["leader"]

    code, out, err = await jobrelay(manager, "version")
    assert (code, err) == (0, ""), out + err
    client_line, server_line = out.splitlines()
    assert client_line == f"Client Version: {VERSION}"
    assert server_line.startswith(f"Server Version: {VERSION} (leader ")
    code, out, err = await jobrelay(manager, "version", "--client")
    assert (code, out) == (0, f"Client Version: {VERSION}\n")


async def test_version_with_an_unreachable_server_is_the_client_line_and_one_error(
    tmp_path: Path, fleet: FleetHandle
) -> None:
    document = yaml.safe_load(fleet.kubeconfig("manager").read_text())
    with socket.socket() as bound:  # bound, never listening: refused
        bound.bind(("127.0.0.1", 0))
        server = f"https://127.0.0.1:{bound.getsockname()[1]}"
        for entry in document["clusters"]:
            entry["cluster"]["server"] = server
        refused = tmp_path / "refused"
        refused.write_text(yaml.safe_dump(document))
        code, out, err = await jobrelay(refused, "version")
    assert code == 1
    assert out == f"Client Version: {VERSION}\n"
    assert err.splitlines() == [
        f"error: cannot connect to {server} (connection refused): check --kubeconfig and "
        "--context, and that its apiserver is up"
    ]


async def test_get_and_describe_see_the_generic_kind_by_its_kubectl_names(
    sleepers: Relay, fleet: FleetHandle
) -> None:
    """The defect: a generic kind the controller runs was invisible to `get` and `describe`."""
    manager = fleet.kubeconfig("manager")
    created = await sleepers.submit(sleeper_manifest("napper", seconds=3600))
    name = created["metadata"]["name"]
    ns = ["-n", sleepers.namespace]
    for type_name in ("sleepers", "sleeper", "Sleeper", f"sleepers.{GROUP}"):
        code, out, err = await jobrelay(manager, "get", type_name, *ns, "-o", "name")
        assert (code, out) == (0, f"sleeper.{GROUP}/{name}\n"), out + err
    code, out, err = await jobrelay(manager, "get", "all", *ns, "-o", "name")
    assert f"sleeper.{GROUP}/{name}" in out.splitlines(), out + err
    code, out, err = await jobrelay(
        manager, "get", f"sleeper/{name}", *ns, "-o", "jsonpath={.spec.seconds} {.kind}"
    )
    assert (code, out) == (0, "3600 Sleeper"), out + err
    code, out, err = await jobrelay(
        manager, "get", "sleepers", *ns, "-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team",
        "--no-headers",
    )  # fmt: skip
    assert out.split() == [name, "e2e"], out + err
    code, out, err = await jobrelay(manager, "describe", f"sleeper/{name}", *ns)
    assert code == 0, out + err
    assert f"Kind:             Sleeper ({GROUP}/v1)" in out
    code, out, err = await jobrelay(manager, "describe", "sleepers", "-l", "team=e2e", *ns)
    assert f"Name:             {name}" in out, out + err
