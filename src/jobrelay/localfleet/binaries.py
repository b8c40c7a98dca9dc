"""Find, or build from the Go module proxy, the binaries a local fleet runs.

Release downloads are out of reach, so kube-apiserver, kube-controller-manager
and kube-scheduler are built from ``k8s.io/kubernetes`` used as a Go module
(its staging modules replaced by their published v0.x releases), and kwok with
``go install``. Builds land in a versioned cache directory outside the repo and
are reused; a lock keeps two concurrent first runs from building twice.
etcd comes from Debian's ``etcd-server`` package (3.4, which a v1.35 apiserver
accepts) because it installs in seconds, where a Go build costs minutes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "v1.35.4"
K8S_STAGING_VERSION = "v0.35.4"
KWOK_VERSION = "v0.7.0"
K8S_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

Progress = Callable[[str], None]


class BinaryError(RuntimeError):
    """A binary is missing, of the wrong version, or could not be built."""


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path
    kwok: Path


def cache_root() -> Path:
    explicit = os.environ.get("JOBRELAY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "jobrelay"


def resolve(progress: Progress = print, *, build: bool = True) -> Binaries:
    """Locate every binary, building what is missing when ``build`` is true."""
    k8s_dir = _kubernetes_dir(progress, build=build)
    return Binaries(
        kube_apiserver=k8s_dir / "kube-apiserver",
        kube_controller_manager=k8s_dir / "kube-controller-manager",
        kube_scheduler=k8s_dir / "kube-scheduler",
        etcd=_etcd(),
        kwok=_kwok(progress, build=build),
    )


def _version_of(binary: Path, flag: str = "--version") -> str:
    """What ``binary --version`` prints; BinaryError saying why when it cannot run."""
    if not binary.exists():
        raise BinaryError(f"{binary} does not exist")
    if binary.is_dir() or not os.access(binary, os.X_OK):
        raise BinaryError(f"{binary} is not an executable file")
    try:
        result = subprocess.run(
            [str(binary), flag], capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise BinaryError(f"`{binary} {flag}` did not answer within 30s") from error
    except OSError as error:
        raise BinaryError(f"{binary} cannot be run: {error}") from error
    return (result.stdout + result.stderr).strip()


def _checked_version(binary: Path, *, hint: str) -> str:
    try:
        return _version_of(binary)
    except BinaryError as error:
        raise BinaryError(f"{error} ({hint})") from error


def _first_line(text: str) -> str:
    return repr(text.splitlines()[0]) if text else "nothing"


def _kubernetes_dir(progress: Progress, *, build: bool) -> Path:
    explicit = os.environ.get("JOBRELAY_K8S_BIN_DIR")
    if explicit:
        directory = Path(explicit)
        hint = (
            f"JOBRELAY_K8S_BIN_DIR={explicit}: point it at a directory holding "
            f"{', '.join(K8S_COMPONENTS)} {K8S_VERSION.rsplit('.', 1)[0]}.x, "
            "or unset it to use jobrelay's own build"
        )
        if not directory.is_dir():
            raise BinaryError(f"{directory} is not a directory ({hint})")
        _check_kubernetes(directory, hint=hint)
        return directory
    directory = cache_root() / "bin" / f"k8s-{K8S_VERSION}"
    rebuild = f"delete {directory} and run `jobrelay fleet build` to rebuild"
    if all((directory / name).exists() for name in K8S_COMPONENTS):
        _check_kubernetes(directory, hint=rebuild)
        return directory
    if not build:
        raise BinaryError(
            f"Kubernetes binaries are not built yet in {directory}: run `jobrelay fleet build`"
        )
    with _build_lock():
        if not all((directory / name).exists() for name in K8S_COMPONENTS):
            _build_kubernetes(directory, progress)
    _check_kubernetes(directory, hint=rebuild)
    return directory


def _check_kubernetes(directory: Path, *, hint: str) -> None:
    """Every component present and of the right minor version; all problems in one message."""
    wanted = K8S_VERSION.rsplit(".", 1)[0]  # v1.35: any patch release of the minor works
    problems: list[str] = []
    for name in K8S_COMPONENTS:
        binary = directory / name
        try:
            version = _version_of(binary)
        except BinaryError as error:
            problems.append(str(error))
            continue
        match = re.search(r"v\d+\.\d+\.\d+\S*", version)
        if not match or not (match.group(0) + ".").startswith(wanted + "."):
            problems.append(f"{binary} reports {_first_line(version)}, not Kubernetes {wanted}.x")
    if problems:
        raise BinaryError(
            f"jobrelay's local fleet needs Kubernetes {wanted}.x, but:\n  "
            + "\n  ".join(problems)
            + f"\nTo fix: {hint}."
        )


def _etcd() -> Path:
    explicit = os.environ.get("JOBRELAY_ETCD_BINARY")
    found = (
        explicit
        or shutil.which("etcd")
        or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    )
    if not found:
        raise BinaryError(
            "etcd is not installed: run `apt-get install etcd-server` "
            "(or point JOBRELAY_ETCD_BINARY at an etcd 3.4+ binary)"
        )
    binary = Path(found)
    hint = (
        f"JOBRELAY_ETCD_BINARY={explicit}: point it at an etcd 3.4+ binary, or unset it "
        "to use the etcd on PATH"
        if explicit
        else "install etcd 3.4+ with `apt-get install etcd-server`, or point "
        "JOBRELAY_ETCD_BINARY at one"
    )
    version = _checked_version(binary, hint=hint)
    match = re.search(r"etcd Version: (\d+)\.(\d+)", version)
    if not match or (int(match.group(1)), int(match.group(2))) < (3, 4):
        raise BinaryError(
            f"{binary} reports {_first_line(version)}, but etcd 3.4 or newer is needed ({hint})"
        )
    return binary


def _kwok(progress: Progress, *, build: bool) -> Path:
    explicit = os.environ.get("JOBRELAY_KWOK_BINARY")
    if explicit:
        binary = Path(explicit)
        hint = (
            f"JOBRELAY_KWOK_BINARY={explicit}: point it at a kwok {KWOK_VERSION} binary, "
            "or unset it to use jobrelay's own build"
        )
        version = _checked_version(binary, hint=hint)
        if "kwok version" not in version:
            raise BinaryError(f"{binary} reports {_first_line(version)}, not kwok ({hint})")
        return binary
    directory = cache_root() / "bin" / f"kwok-{KWOK_VERSION}"
    binary = directory / "kwok"
    if binary.exists():
        return binary
    if not build:
        raise BinaryError(f"kwok is not built yet in {directory}: run `jobrelay fleet build`")
    with _build_lock():
        if not binary.exists():
            go = _go()
            progress(f"building kwok {KWOK_VERSION} with {go} (about a minute) ...")
            directory.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix="kwok-", dir=directory.parent))
            _run_go(
                [
                    go,
                    "install",
                    "-trimpath",
                    "-ldflags=-s -w",
                    f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
                ],
                cwd=staging,
                env={"GOBIN": str(staging)},
                progress=progress,
            )
            _replace_dir(staging, directory)
    return binary


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise BinaryError(
            "Go is not installed, and the Kubernetes binaries must be built from source: "
            "install Go 1.25+ (e.g. `apt-get install golang-go` or from go.dev), or set "
            "JOBRELAY_K8S_BIN_DIR to a directory holding kube-apiserver, "
            f"kube-controller-manager and kube-scheduler {K8S_VERSION}"
        )
    return go


@contextmanager
def _build_lock() -> Iterator[None]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_go(argv: list[str], *, cwd: Path, env: dict[str, str], progress: Progress) -> None:
    """Run a go command, turning its ``-v`` package lines into periodic progress."""
    started = time.monotonic()
    full_env = {**os.environ, "GOFLAGS": "-mod=mod", **env}
    process = subprocess.Popen(
        argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    tail: list[str] = []
    last_report = started
    for steps, line in enumerate(process.stdout, start=1):
        tail = [*tail[-30:], line.rstrip()]
        now = time.monotonic()
        if now - last_report > 15:
            progress(f"  ... {steps} packages, {now - started:.0f}s elapsed")
            last_report = now
    if process.wait() != 0:
        raise BinaryError(
            f"`{' '.join(argv)}` failed (is the Go module proxy reachable?):\n" + "\n".join(tail)
        )
    progress(f"  done in {time.monotonic() - started:.0f}s")


def _build_kubernetes(directory: Path, progress: Progress) -> None:
    go = _go()
    progress(
        f"building Kubernetes {K8S_VERSION} ({', '.join(K8S_COMPONENTS)}) from the Go module proxy;"
        " the first build takes 10-20 minutes and about 3 GiB on 2 cores, later runs reuse it"
    )
    workspace = cache_root() / "build" / f"k8s-{K8S_VERSION}"
    workspace.mkdir(parents=True, exist_ok=True)
    _write_build_module(workspace, go, progress)
    staging = Path(tempfile.mkdtemp(prefix="k8s-", dir=workspace))
    version_flags = " ".join(
        f"-X {package}.{name}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for name, value in (
            ("gitVersion", K8S_VERSION),
            ("gitMajor", "1"),
            ("gitMinor", K8S_VERSION.split(".")[1]),
            ("gitTreeState", "clean"),
        )
    )
    _run_go(
        [
            go,
            "build",
            "-v",
            "-trimpath",
            f"-ldflags=-s -w {version_flags}",
            "-o",
            str(staging) + "/",
            *(f"k8s.io/kubernetes/cmd/{name}" for name in K8S_COMPONENTS),
        ],
        cwd=workspace,
        env={},
        progress=progress,
    )
    _replace_dir(staging, directory)


def _replace_dir(staging: Path, directory: Path) -> None:
    # Builds land in a staging directory first, so an interrupted build never
    # leaves a half-filled cache that a later run would trust.
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists():
        shutil.rmtree(directory)
    staging.rename(directory)


def _write_build_module(workspace: Path, go: str, progress: Progress) -> None:
    """A Go module requiring k8s.io/kubernetes, with each staging module pinned.

    k8s.io/kubernetes's own go.mod replaces its staging modules with local
    paths that do not exist in the module zip; pointing each at its published
    release is what makes the module buildable from the proxy.
    """
    progress(f"resolving k8s.io/kubernetes@{K8S_VERSION} on the Go module proxy ...")
    info = subprocess.run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{K8S_VERSION}"],
        capture_output=True,
        text=True,
        check=False,
        cwd=workspace,
    )
    if info.returncode != 0:
        raise BinaryError(
            f"cannot download k8s.io/kubernetes@{K8S_VERSION} (is the Go module proxy reachable?): "
            + (info.stdout + info.stderr)[-2000:]
        )
    upstream = Path(json.loads(info.stdout)["GoMod"]).read_text()
    staging_modules = re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", upstream, re.M)
    go_directive = re.search(r"^go (\S+)", upstream, re.M)
    replaces = "\n".join(f"\t{name} => {name} {K8S_STAGING_VERSION}" for name in staging_modules)
    (workspace / "go.mod").write_text(
        "module jobrelay.dev/k8sbuild\n\n"
        f"go {go_directive.group(1) if go_directive else '1.25.0'}\n\n"
        f"require k8s.io/kubernetes {K8S_VERSION}\n\n"
        f"replace (\n{replaces}\n)\n"
    )
    (workspace / "tools.go").write_text(
        "//go:build tools\n\npackage k8sbuild\n\nimport (\n"
        + "".join(f'\t_ "k8s.io/kubernetes/cmd/{name}"\n' for name in K8S_COMPONENTS)
        + ")\n"
    )
    progress("resolving dependencies (go mod tidy) ...")
    _run_go([go, "mod", "tidy"], cwd=workspace, env={}, progress=progress)
