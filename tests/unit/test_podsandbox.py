"""tests/e2e/podsandbox.py's pure part: a rendered Deployment to a bwrap command line."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.e2e.podsandbox import (
    HostTree,
    PodFacts,
    SandboxError,
    container_env,
    expand,
    pod_command,
    quantity_bytes,
)

# A small host: /bin links to usr/bin, /var/run to /run, no /etc/jobrelay, no /run/secrets.
_TREE = {
    "/": ["bin", "etc", "proc", "run", "tmp", "usr", "var"],
    "/etc": ["hosts", "localtime", "ssl"],
    "/run": ["lock"],
    "/var": ["lib", "run"],
}
_LINKS = {"/bin": "usr/bin", "/var/run": "/run", "/etc/localtime": "/usr/share/zoneinfo/UTC"}
_FILES = {"/usr", "/tmp", "/proc", "/etc/hosts", "/etc/ssl", "/run/lock", "/var/lib"}
TREE = HostTree(
    entries=lambda path: _TREE[path],
    symlink=_LINKS.get,
    exists=lambda path: path in _TREE or path in _LINKS or path in _FILES,
)
FACTS = PodFacts(
    name="rel-jobrelay-abc-123",
    namespace="team",
    ip="127.0.0.1",
    service_host="127.0.0.1",
    service_port=6443,
    entrypoint=("/usr/bin/python3", "-m", "jobrelay"),
    image_env={"PYTHONPATH": "/src"},
)
DEPLOYMENT: dict[str, Any] = {
    "spec": {
        "template": {
            "spec": {
                "automountServiceAccountToken": True,
                "securityContext": {
                    "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "jobrelay",
                        "args": ["run", "--api-url=https://$(POD_IP):8443", "--x=$$(POD_IP)"],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                            {"name": "WHERE", "value": "at $(POD_IP)"},
                        ],
                        "securityContext": {
                            "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [
                            {"name": "tmp", "mountPath": "/tmp"},
                            {"name": "api-tls", "mountPath": "/etc/jobrelay/api-tls", "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                    {"name": "api-tls", "secret": {"secretName": "s", "defaultMode": 0o440}},
                ],
            }
        }
    }
}  # fmt: skip
SECRET_DIR = Path("/host/pod/api-tls")
SA_DIR = Path("/host/pod/serviceaccount")


def command(deployment: dict[str, Any] = DEPLOYMENT) -> list[str]:
    return pod_command(
        deployment,
        FACTS,
        secret_dirs={"api-tls": SECRET_DIR},
        service_account_dir=SA_DIR,
        tree=TREE,
    )


def pairs(argv: list[str], option: str, width: int = 2) -> list[list[str]]:
    return [argv[i + 1 : i + 1 + width] for i, arg in enumerate(argv) if arg == option]


def test_the_user_capabilities_and_namespaces_are_the_pods() -> None:
    argv = command()
    assert argv[0] == "bwrap"
    assert pairs(argv, "--uid", 1) == [["65532"]] and pairs(argv, "--gid", 1) == [["65532"]]
    assert pairs(argv, "--cap-drop", 1) == [["ALL"]]
    assert {"--unshare-user", "--unshare-pid", "--die-with-parent"} <= set(argv)
    assert pairs(argv, "--hostname", 1) == [[FACTS.name]]


def test_the_root_is_read_only_and_only_the_volumes_are_mounted_over_it() -> None:
    argv = command()
    binds = pairs(argv, "--ro-bind")
    # Directories holding no mount point are bound whole; /etc, which must hold the
    # Secret's mount point, entry by entry; /proc and /dev are bwrap's own.
    assert ["/usr", "/usr"] in binds and ["/var", "/var"] in binds
    assert ["/etc/hosts", "/etc/hosts"] in binds and ["/etc", "/etc"] not in binds
    assert ["/proc", "/proc"] not in binds and ["/tmp", "/tmp"] not in binds
    assert ["usr/bin", "/bin"] in pairs(argv, "--symlink")
    assert ["/usr/share/zoneinfo/UTC", "/etc/localtime"] in pairs(argv, "--symlink")
    # The volumes: a sized tmpfs, the Secret read-only, the ServiceAccount where
    # /var/run/secrets/... lands (/var/run links to /run).
    assert pairs(argv, "--size", 3) == [["16777216", "--tmpfs", "/tmp"]]
    assert [str(SECRET_DIR), "/etc/jobrelay/api-tls"] in binds
    assert [str(SA_DIR), "/run/secrets/kubernetes.io/serviceaccount"] in binds
    # The root remounted read-only after every mount, before the process starts.
    remount = argv.index("--remount-ro")
    assert argv[remount + 1] == "/"
    assert remount > max(i for i, arg in enumerate(argv) if arg in ("--tmpfs", "--ro-bind"))
    assert remount < argv.index("--")


def test_the_images_paths_under_a_volume_stay_visible_after_it_is_mounted() -> None:
    """A CI clone's venv under /tmp: the chart's emptyDir there must not hide the image."""
    facts = dataclasses.replace(FACTS, image_paths=("/tmp/clone/.venv", "/usr/lib/python3"))
    argv = pod_command(
        DEPLOYMENT, facts, secret_dirs={"api-tls": SECRET_DIR}, service_account_dir=SA_DIR,
        tree=TREE,
    )  # fmt: skip
    binds = pairs(argv, "--ro-bind")
    assert ["/tmp/clone/.venv", "/tmp/clone/.venv"] in binds
    venv = argv.index("/tmp/clone/.venv")
    assert argv.index("--tmpfs") < venv < argv.index("--remount-ro")
    assert ["/usr/lib/python3", "/usr/lib/python3"] not in binds  # /usr is bound whole


def test_the_environment_is_only_the_pods_and_args_expand_like_the_kubelets() -> None:
    argv = command()
    assert "--clearenv" in argv
    env = dict(pairs(argv, "--setenv"))
    assert env["POD_NAME"] == FACTS.name and env["POD_IP"] == "127.0.0.1"
    assert env["WHERE"] == "at 127.0.0.1"
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "6443"
    assert env["HOME"] == "/" and env["PYTHONPATH"] == "/src"
    process = argv[argv.index("--") + 1 :]
    assert process == [
        "/usr/bin/python3", "-m", "jobrelay", "run",
        "--api-url=https://127.0.0.1:8443", "--x=$(POD_IP)",
    ]  # fmt: skip


def _changed(path: list[Any], value: Any) -> dict[str, Any]:
    deployment = copy.deepcopy(DEPLOYMENT)
    target: Any = deployment["spec"]["template"]["spec"]
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return deployment


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (["containers", 0, "securityContext", "readOnlyRootFilesystem"], False, "readOnlyRoot"),
        (["containers", 0, "securityContext", "capabilities"], {"drop": []}, "capabilities"),
        (["containers", 0, "securityContext", "allowPrivilegeEscalation"], None, "Escalation"),
        (["securityContext", "runAsUser"], 0, "runAsUser"),
        (["volumes", 1], {"name": "api-tls", "hostPath": {"path": "/"}}, "emptyDir and secret"),
        (
            ["containers", 0, "env", 0],
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            "fieldRefs",
        ),
    ],
)
def test_what_the_sandbox_cannot_reproduce_is_refused(
    path: list[Any], value: Any, problem: str
) -> None:
    with pytest.raises(SandboxError, match=problem):
        command(_changed(path, value))


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [("16Mi", 16 * 1024**2), ("1Gi", 1024**3), ("64Ki", 65536), ("2M", 2_000_000), ("512", 512)],
)
def test_quantities_of_bytes(quantity: str, expected: int) -> None:
    assert quantity_bytes(quantity) == expected


def test_env_references_to_earlier_variables_only() -> None:
    container = {"env": [{"name": "A", "value": "$(B)-x"}, {"name": "B", "value": "b"}]}
    assert container_env(container, FACTS) == {"A": "$(B)-x", "B": "b"}


@given(st.text(alphabet="ab$()XY_", max_size=30))
def test_expanding_without_variables_only_unescapes(text: str) -> None:
    # With no variables known, only $$ changes (to $), and nothing else does.
    assert expand(text, {}) == _unescaped(text)


def _unescaped(text: str) -> str:
    out, i = "", 0
    while i < len(text):
        if text.startswith("$$", i):
            out, i = out + "$", i + 2
        else:
            out, i = out + text[i], i + 1
    return out
