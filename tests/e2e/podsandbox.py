"""Run a rendered Deployment's container the way its pod would, under bubblewrap.

The pure part (:func:`pod_command`) turns the Deployment and a few facts the
kubelet would supply (the pod's name, namespace and IP, where the apiserver is)
into a ``bwrap`` command line:

- the container's ``args`` after the image's entrypoint (``jobrelay`` is
  ``python -m jobrelay``), ``$(VAR)`` references expanded as the kubelet does;
- only the container's ``env`` (``fieldRef``s resolved) and what the kubelet and
  the image add (``KUBERNETES_SERVICE_HOST``/``PORT``, ``HOSTNAME``, ``HOME=/``,
  ``PATH``): nothing else of the test's environment;
- the root filesystem read-only (``readOnlyRootFilesystem``): the host's
  directories bound read-only onto a root that is itself remounted read-only,
  so the only writable places are the chart's volumes: an ``emptyDir`` is a
  tmpfs of its ``sizeLimit``, a Secret's keys are read-only files at its
  ``mountPath``, and the ServiceAccount's token, CA and namespace are at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` (``automountServiceAccountToken``);
- the pod's user and group (``runAsUser``/``runAsGroup``), no capabilities
  (``capabilities.drop: [ALL]``), no new privileges, its own PID, IPC and UTS
  namespaces (hostname = pod name). The network is the host's: the pod's IP is
  127.0.0.1 and the local fleet listens there.

"Non-root" here means what a container runtime's user namespace gives: inside,
the process is uid/gid 65532 with an empty capability set and no_new_privs, so
it can change nothing it does not own and gain nothing by exec. bwrap maps that
uid onto the host user that started the test (root on CI: /root, which holds
the interpreter under /root/.pyenv, is mode 700), so the permission bits of the
host's files are checked against that user; what the sandbox proves is the
container's side: no capability, no writable path but the declared volumes,
and nothing in jobrelay that needs uid 0 or a home directory.

The impure part (:class:`PodFiles`) writes the volumes' files (the Secret's
keys, the ServiceAccount's) into a private directory for the command to bind.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import stat
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tests.e2e.support import ControllerProcess

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "HostTree",
    "PodFacts",
    "PodFiles",
    "SandboxError",
    "SandboxedPod",
    "container_env",
    "expand",
    "host_tree",
    "pod_command",
    "quantity_bytes",
]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Mounted by bwrap itself, never bound from the host.
_OWN_MOUNTS = {"/proc", "/dev"}
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_SUFFIXES = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "k": 1000, "M": 1000**2, "G": 1000**3}


class SandboxError(ValueError):
    """The Deployment asks for something this sandbox cannot reproduce."""


@dataclass(frozen=True)
class PodFacts:
    """What the apiserver and kubelet would fill in for one pod of the Deployment."""

    name: str
    namespace: str
    ip: str
    service_host: str  # KUBERNETES_SERVICE_HOST: the manager's apiserver
    service_port: int
    # The image's entrypoint: `jobrelay` is this interpreter running the package.
    entrypoint: Sequence[str] = ("python3", "-m", "jobrelay")
    # The image's own environment (PATH, PYTHONPATH of the installed package ...).
    image_env: Mapping[str, str] = field(default_factory=dict)
    # The host paths that stand for the image's content (the interpreter, its packages,
    # the source): bound read-only even where a volume covers them, as a checkout or a
    # venv under /tmp is when the chart mounts its emptyDir there.
    image_paths: Sequence[str] = ()


@dataclass(frozen=True)
class HostTree:
    """What the sandbox needs to know of the host's filesystem (a fake one in unit tests)."""

    entries: Callable[[str], list[str]]  # names in a directory
    symlink: Callable[[str], str | None]  # a symlink's target, None when not one
    exists: Callable[[str], bool]


def host_tree() -> HostTree:
    def symlink(path: str) -> str | None:
        return os.readlink(path) if os.path.islink(path) else None

    return HostTree(lambda path: sorted(os.listdir(path)), symlink, os.path.lexists)


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes quantity of bytes (``16Mi``) as an integer."""
    for suffix, factor in _SUFFIXES.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(VAR)`` as the kubelet expands it in args and env: unknown ones stay, ``$$`` is ``$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REFERENCE.sub(one, text)


def container_env(container: Mapping[str, Any], facts: PodFacts) -> dict[str, str]:
    """The container's ``env`` with its ``fieldRef``s resolved, in order (later may use earlier)."""
    fields = {
        "metadata.name": facts.name,
        "metadata.namespace": facts.namespace,
        "status.podIP": facts.ip,
        "status.podIPs": facts.ip,
        "spec.nodeName": "local-manager",
    }
    env: dict[str, str] = {}
    for variable in container.get("env") or ():
        name = variable["name"]
        if "value" in variable:
            env[name] = expand(str(variable["value"]), env)
            continue
        source = variable.get("valueFrom") or {}
        path = (source.get("fieldRef") or {}).get("fieldPath")
        if path not in fields:
            raise SandboxError(f"env {name}: only fieldRefs of {sorted(fields)} are resolved")
        env[name] = fields[path]
    return env


def _container(deployment: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    for container in containers:
        if container["name"] == name:
            found: Mapping[str, Any] = container
            return found
    raise SandboxError(f"no container {name!r} in the Deployment")


def _security(pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's effective security settings (the container's win over the pod's)."""
    merged = {**(pod.get("securityContext") or {}), **(container.get("securityContext") or {})}
    if not merged.get("readOnlyRootFilesystem"):
        raise SandboxError("the sandbox reproduces readOnlyRootFilesystem: true only")
    if merged.get("allowPrivilegeEscalation", True):
        raise SandboxError("allowPrivilegeEscalation must be false")
    if "ALL" not in ((merged.get("capabilities") or {}).get("drop") or ()):
        raise SandboxError("capabilities.drop must be [ALL]")
    if not merged.get("runAsNonRoot") or not merged.get("runAsUser"):
        raise SandboxError("runAsNonRoot with a runAsUser other than 0 is required")
    return merged


def _sandbox_path(path: str, tree: HostTree) -> str:
    """Where ``path`` lands in the sandbox: host symlinks on its existing prefix followed
    (``/var/run/...`` is ``/run/...`` when /var/run links there)."""
    parts = PurePosixPath(path).parts[1:]
    resolved = PurePosixPath("/")
    for index, part in enumerate(parts):
        candidate = resolved / part
        if not tree.exists(str(candidate)):
            return str(PurePosixPath(candidate, *parts[index + 1 :]))
        target = tree.symlink(str(candidate))
        resolved = (
            candidate
            if target is None
            else PurePosixPath(os.path.normpath(str(PurePosixPath(resolved, target))))
        )
    return str(resolved)


def _assembled(mount_points: Iterable[str], tree: HostTree) -> set[str]:
    """The directories to rebuild entry by entry: the parents of a mount point the
    host lacks (bwrap cannot create one in a read-only bind), and their ancestors."""
    assembled = {"/"}
    for point in mount_points:
        path = PurePosixPath(point)
        missing = next(
            (p for p in reversed([path, *path.parents]) if not tree.exists(str(p))), None
        )
        if missing is None:
            continue
        for ancestor in [missing.parent, *missing.parent.parents]:
            assembled.add(str(ancestor))
    return assembled


def _root_binds(
    mount_points: Sequence[str], tree: HostTree, assembled: set[str], directory: str = "/"
) -> list[str]:
    """The host's tree bound read-only, but for the mount points themselves."""
    args: list[str] = []
    for name in tree.entries(directory):
        path = str(PurePosixPath(directory, name))
        if path in mount_points or path in _OWN_MOUNTS:
            continue
        target = tree.symlink(path)
        if target is not None:
            args += ["--symlink", target, path]
        elif path in assembled:
            args += _root_binds(mount_points, tree, assembled, path)
        else:
            args += ["--ro-bind", path, path]
    return args


def pod_command(
    deployment: Mapping[str, Any],
    facts: PodFacts,
    *,
    secret_dirs: Mapping[str, Path],
    service_account_dir: Path,
    tree: HostTree,
    container_name: str = "jobrelay",
) -> list[str]:
    """The bwrap command line that runs ``container_name`` of ``deployment`` as its pod would.

    ``secret_dirs``: for each Secret volume, the host directory holding its files
    (see :class:`PodFiles`); ``service_account_dir``: the token, ca.crt and namespace.
    """
    pod = deployment["spec"]["template"]["spec"]
    container = _container(deployment, container_name)
    security = _security(pod, container)
    volumes = {volume["name"]: volume for volume in pod.get("volumes") or ()}
    mounts: list[tuple[str, list[str]]] = []
    for mount in container.get("volumeMounts") or ():
        volume = volumes.get(mount["name"])
        if volume is None:
            raise SandboxError(f"volumeMount {mount['name']}: no such volume")
        point = _sandbox_path(mount["mountPath"], tree)
        if "emptyDir" in volume:
            size = (volume["emptyDir"] or {}).get("sizeLimit")
            sized = ["--size", str(quantity_bytes(size))] if size else []
            mounts.append((point, [*sized, "--tmpfs", point]))
        elif "secret" in volume:
            if not mount.get("readOnly"):
                raise SandboxError(f"volumeMount {mount['name']}: a Secret is mounted readOnly")
            source = secret_dirs[mount["name"]]
            mounts.append((point, ["--ro-bind", str(source), point]))
        else:
            raise SandboxError(f"volume {mount['name']}: only emptyDir and secret are reproduced")
    if pod.get("automountServiceAccountToken", True):
        point = _sandbox_path(SERVICE_ACCOUNT_DIR, tree)
        mounts.append((point, ["--ro-bind", str(service_account_dir), point]))
    points = [point for point, _ in mounts]
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        **facts.image_env,
        "HOSTNAME": facts.name,
        "HOME": "/",  # a uid without a passwd entry: what container runtimes set
        "KUBERNETES_SERVICE_HOST": facts.service_host,
        "KUBERNETES_SERVICE_PORT": str(facts.service_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(facts.service_port),
    }
    declared = container_env(container, facts)
    env.update(declared)
    args = [expand(str(arg), declared) for arg in container.get("args") or ()]
    command = [*(container.get("command") or facts.entrypoint), *args]
    bwrap = [
        "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-user",
        "--uid", str(security["runAsUser"]),
        "--gid", str(security.get("runAsGroup", security["runAsUser"])),
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--hostname", facts.name,
        "--cap-drop", "ALL",
        *_root_binds(points, tree, _assembled(points, tree)),
        "--proc", "/proc",
        "--dev", "/dev",
    ]  # fmt: skip
    for _point, arguments in mounts:
        bwrap += arguments
    for path in dict.fromkeys(facts.image_paths):
        if any(PurePosixPath(path).is_relative_to(point) for point in points):
            bwrap += ["--ro-bind", path, path]
    # The root itself (a tmpfs holding the binds and the assembled directories)
    # read-only last; the volumes' mounts below it keep their own flags.
    bwrap += ["--remount-ro", "/", "--clearenv"]
    for name, value in env.items():
        bwrap += ["--setenv", name, value]
    bwrap += ["--chdir", container.get("workingDir") or "/", "--", *command]
    return bwrap


class PodFiles:
    """The files of a pod's Secret volumes and ServiceAccount, in a private host directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)

    def secret_volume(self, volume: Mapping[str, Any], secret: Mapping[str, Any]) -> Path:
        """A Secret's keys as files with the volume's ``defaultMode``, read-only."""
        directory = self.root / str(volume["name"])
        directory.mkdir(mode=0o700)
        mode = int((volume.get("secret") or {}).get("defaultMode", 0o644))
        for key, value in (secret.get("data") or {}).items():
            self._write(directory / key, base64.b64decode(value), mode)
        directory.chmod(0o755)
        return directory

    def service_account(self, token: str, ca: bytes, namespace: str) -> Path:
        directory = self.root / "serviceaccount"
        directory.mkdir(mode=0o700)
        self._write(directory / "token", token.encode(), 0o440)
        self._write(directory / "ca.crt", ca, 0o444)
        self._write(directory / "namespace", namespace.encode(), 0o444)
        directory.chmod(0o755)
        return directory

    @staticmethod
    def _write(path: Path, content: bytes, mode: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        path.chmod(stat.S_IMODE(mode))


class SandboxedPod(ControllerProcess):
    """A :func:`pod_command` running, logged and stopped like any e2e controller; signals
    go by PID to the entrypoint's process inside (bwrap does not pass SIGTERM on)."""

    def __init__(
        self,
        command: list[str],
        entrypoint: Sequence[str],
        log_path: Path,
        *,
        workers: Sequence[str],
    ) -> None:
        # No kubeconfig: the pod's in-cluster credentials are inside the sandbox.
        super().__init__(Path("/nonexistent"), log_path, workers=workers, install_crds=False)
        self.argv = command
        self.entrypoint = list(entrypoint)

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={"PATH": "/usr/bin:/bin"}, start_new_session=True,
            )  # fmt: skip

    def _sigterm_target(self) -> int | None:
        assert self.process is not None
        return _descendant_running(self.process.pid, self.entrypoint)

    def _signal(self, sig: int) -> None:
        """bwrap does not pass SIGTERM on: send it to the jobrelay process it runs."""
        assert self.process is not None
        inner = _descendant_running(self.process.pid, self.entrypoint)
        if inner is None or sig == signal.SIGKILL:
            self.process.send_signal(sig)  # --die-with-parent takes the rest
        else:
            os.kill(inner, sig)


def _descendant_running(pid: int, entrypoint: Sequence[str]) -> int | None:
    """The first descendant of ``pid`` whose command line starts with ``entrypoint``
    (bwrap's own command line holds it further on)."""
    wanted = [part.encode() for part in entrypoint]
    pending = [pid]
    while pending:
        current = pending.pop(0)
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError):
                pending += [int(child) for child in (task / "children").read_text().split()]
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{current}/cmdline").read_bytes().split(b"\0")
            if current != pid and argv[: len(wanted)] == wanted:
                return current
    return None
