"""Find, or build from the Go module proxy, the binaries a local fleet runs.

Release downloads are out of reach, so kube-apiserver, kube-controller-manager
and kube-scheduler are built from ``k8s.io/kubernetes`` used as a Go module
(its staging modules replaced by their published v0.x releases), kwok with
``go install``, and the JobSet controller with ``go build`` in a tiny module
requiring ``sigs.k8s.io/jobset`` (``go install sigs.k8s.io/jobset@VERSION``
asks the proxy for the module's version list, which the proxy refuses); its
CRD, RBAC role and webhook configurations are taken from the same module zip
(see ``_jobset``). Builds land in a versioned cache directory outside the repo and are reused; a
lock keeps two concurrent first runs from building twice.
etcd comes from Debian's ``etcd-server`` package (3.4, which a v1.35 apiserver
accepts) because it installs in seconds, where a Go build costs minutes.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

K8S_VERSION = "v1.35.4"
K8S_STAGING_VERSION = "v0.35.4"
KWOK_VERSION = "v0.7.0"
K8S_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# v0.11.0 rather than v0.10.1 (the proxy serves both): it is built against k8s.io
# v0.35, the fleet's Kubernetes minor (v0.10.1: v0.34); both skip JobSets whose
# spec.managedBy names another controller, as releases since at least v0.5 do.
JOBSET_VERSION = "v0.11.0"
JOBSET_MODULE = "sigs.k8s.io/jobset"
JOBSET_BINARY = "jobset-controller"
# What the JobSet build keeps of its module next to the binary: CRD, RBAC role and
# webhook configurations, as JSON (the CRD's 800 KB of YAML parse slowly in Python).
JOBSET_MANIFESTS = "jobset-manifests.json"

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
    jobset_controller: Path
    # The JSON file of the manifests matching jobset_controller (see JOBSET_MANIFESTS).
    jobset_manifests: Path


def cache_root() -> Path:
    explicit = os.environ.get("JOBRELAY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "jobrelay"


def resolve(progress: Progress = print, *, build: bool = True) -> Binaries:
    """Locate every binary, building what is missing when ``build`` is true."""
    k8s_dir = _kubernetes_dir(progress, build=build)
    etcd = _etcd()
    kwok = _kwok(progress, build=build)
    jobset_controller, jobset_manifests = _jobset(progress, build=build)
    return Binaries(
        kube_apiserver=k8s_dir / "kube-apiserver",
        kube_controller_manager=k8s_dir / "kube-controller-manager",
        kube_scheduler=k8s_dir / "kube-scheduler",
        etcd=etcd,
        kwok=kwok,
        jobset_controller=jobset_controller,
        jobset_manifests=jobset_manifests,
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


def _jobset(progress: Progress, *, build: bool) -> tuple[Path, Path]:
    """The JobSet controller binary, and the JSON file of its version's manifests.

    ``JOBRELAY_JOBSET_BINARY`` points at another build of the pinned minor
    release (checked by the Go module information in the binary). Its manifests
    are a ``jobset-manifests.json`` next to it when there is one (the layout of
    jobrelay's own cache directory), else the cached ones, which are extracted
    from the module zip when missing: that needs Go and the proxy, but no build.
    """
    directory = cache_root() / "bin" / f"jobset-controller-{JOBSET_VERSION}"
    binary, manifests = directory / JOBSET_BINARY, directory / JOBSET_MANIFESTS
    explicit = os.environ.get("JOBRELAY_JOBSET_BINARY")
    if explicit:
        binary = Path(explicit)
        _check_jobset(
            binary,
            hint=f"JOBRELAY_JOBSET_BINARY={explicit}: point it at a JobSet controller "
            f"{_minor(JOBSET_VERSION)}.x (a Go build of {JOBSET_MODULE}), or unset it to use "
            "jobrelay's own build",
        )
        beside = binary.parent / JOBSET_MANIFESTS
        if beside.is_file():
            return binary, beside
        if manifests.is_file():
            return binary, manifests
        if not build:
            raise BinaryError(
                f"the JobSet {JOBSET_VERSION} CRD, RBAC role and webhook configurations are "
                f"not in {directory} yet: run `jobrelay fleet build`"
            )
        with _build_lock():
            if not manifests.is_file():
                go = _go("the JobSet manifests", _JOBSET_GO_ALTERNATIVE)
                directory.mkdir(parents=True, exist_ok=True)
                module = _download_module(go, JOBSET_MODULE, JOBSET_VERSION, _jobset_workspace())
                _write_jobset_manifests(Path(module["Zip"]), manifests)
        return binary, manifests
    if binary.exists() and manifests.exists():
        return binary, manifests
    if not build:
        raise BinaryError(
            f"the JobSet controller is not built yet in {directory}: run `jobrelay fleet build`"
        )
    with _build_lock():
        if not (binary.exists() and manifests.exists()):
            _build_jobset(directory, progress)
    return binary, manifests


_JOBSET_GO_ALTERNATIVE = (
    f"JOBRELAY_JOBSET_BINARY to a JobSet controller {JOBSET_VERSION} binary with a "
    f"{JOBSET_MANIFESTS} next to it"
)


def _minor(version: str) -> str:
    return version.rsplit(".", 1)[0]


def _jobset_workspace() -> Path:
    # Where the build module lives; also a harmless directory for `go mod download`.
    workspace = cache_root() / "build" / f"jobset-{JOBSET_VERSION}"
    workspace.mkdir(parents=True, exist_ok=True)
    return workspace


def _build_jobset(directory: Path, progress: Progress) -> None:
    """Build the controller from a tiny module of ours that requires the release.

    ``go install sigs.k8s.io/jobset@VERSION`` would be simpler, but it looks up
    the module's deprecation in its version list, which the proxy refuses. Built
    as a dependency (JobSet's go.mod has no replace directives, so nothing needs
    pinning), the binary records the module's version and checksum, which is how
    ``_check_jobset`` recognises it; dependency versions are the release's own.
    """
    go = _go("the JobSet controller", _JOBSET_GO_ALTERNATIVE)
    progress(
        f"building the JobSet controller {JOBSET_VERSION} from the Go module proxy "
        "(2-5 minutes once, later runs reuse it) ..."
    )
    workspace = _jobset_workspace()
    module = _download_module(go, JOBSET_MODULE, JOBSET_VERSION, workspace)
    upstream = Path(module["GoMod"]).read_text()
    go_directive = re.search(r"^go (\S+)", upstream, re.M)
    (workspace / "go.mod").write_text(
        "module jobrelay.dev/jobsetbuild\n\n"
        f"go {go_directive.group(1) if go_directive else '1.25.0'}\n\n"
        f"require {JOBSET_MODULE} {JOBSET_VERSION}\n"
    )
    (workspace / "tools.go").write_text(
        f'//go:build tools\n\npackage jobsetbuild\n\nimport _ "{JOBSET_MODULE}"\n'
    )
    progress("resolving dependencies (go mod tidy) ...")
    _run_go([go, "mod", "tidy"], cwd=workspace, env={}, progress=progress)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="jobset-", dir=directory.parent))
    try:
        _write_jobset_manifests(Path(module["Zip"]), staging / JOBSET_MANIFESTS)
        version_package = f"{JOBSET_MODULE}/pkg/version"
        commit = (module.get("Origin") or {}).get("Hash", "")
        ldflags = f"-s -w -X {version_package}.GitVersion={JOBSET_VERSION}" + (
            f" -X {version_package}.GitCommit={commit}" if commit else ""
        )
        _run_go(
            [
                go,
                "build",
                "-v",
                "-trimpath",
                f"-ldflags={ldflags}",
                "-o",
                str(staging / JOBSET_BINARY),
                JOBSET_MODULE,
            ],
            cwd=workspace,
            env={},
            progress=progress,
        )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _replace_dir(staging, directory)


def _download_module(go: str, module: str, version: str, cwd: Path) -> dict[str, Any]:
    """`go mod download -json module@version`: the paths of its zip, extracted tree and go.mod."""
    info = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )
    if info.returncode != 0:
        raise BinaryError(
            f"cannot download {module}@{version} (is the Go module proxy reachable?): "
            + (info.stdout + info.stderr)[-2000:]
        )
    found: dict[str, Any] = json.loads(info.stdout)
    return found


# libyaml when PyYAML has it: the JobSet CRD is 800 KB of YAML.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def jobset_manifests_from_zip(archive_path: Path) -> dict[str, Any]:
    """The CRD, RBAC role and webhook configurations of the JobSet module zip.

    They are upstream's ``config/components`` as its default kustomization
    renders them (``jobset-`` name prefix, the webhook patches applied); the
    webhooks' ``clientConfig.service`` is left for the fleet to replace by a URL.
    """
    root = f"{JOBSET_MODULE}@{JOBSET_VERSION}/config/components/"
    try:
        with zipfile.ZipFile(archive_path) as archive:

            def documents(name: str) -> list[Any]:
                text = archive.read(root + name)
                return [doc for doc in yaml.load_all(text, Loader=_YAML_LOADER) if doc]

            (crd,) = documents("crd/bases/jobset.x-k8s.io_jobsets.yaml")
            (role,) = documents("rbac/role.yaml")
            configurations = {doc["kind"]: doc for doc in documents("webhook/manifests.yaml")}
            (kustomization,) = documents("webhook/kustomization.yaml")
            for patch in kustomization.get("patches") or []:
                target = configurations[patch["target"]["kind"]]
                for operation in documents("webhook/" + patch["path"])[0]:
                    _apply_json_patch(target, operation)
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile, yaml.YAMLError) as error:
        raise BinaryError(
            f"{archive_path} does not hold the JobSet manifests jobrelay expects: {error!r}"
        ) from error
    role["metadata"]["name"] = "jobset-" + role["metadata"]["name"]
    webhook_configurations = []
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = configurations[kind]
        configuration["metadata"]["name"] = "jobset-" + configuration["metadata"]["name"]
        webhook_configurations.append(configuration)
    return {
        "version": JOBSET_VERSION,
        "crd": crd,
        "clusterRole": role,
        "webhookConfigurations": webhook_configurations,
    }


def _apply_json_patch(document: Any, operation: dict[str, Any]) -> None:
    """One RFC 6902 ``add``, ``replace`` or ``remove`` (what kustomize patches use here)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in operation["path"].split("/")[1:]]
    for part in parts[:-1]:
        document = document[int(part)] if isinstance(document, list) else document[part]
    last, op = parts[-1], operation["op"]
    if isinstance(document, list):
        index = len(document) if last == "-" else int(last)
        if op == "add":
            document.insert(index, operation["value"])
        elif op == "replace":
            document[index] = operation["value"]
        elif op == "remove":
            del document[index]
        else:
            raise ValueError(f"unsupported patch operation {op!r}")
    elif op in ("add", "replace"):
        document[last] = operation["value"]
    elif op == "remove":
        del document[last]
    else:
        raise ValueError(f"unsupported patch operation {op!r}")


def _write_jobset_manifests(archive_path: Path, destination: Path) -> None:
    manifests = jobset_manifests_from_zip(archive_path)
    temporary = destination.with_suffix(".tmp")
    temporary.write_text(json.dumps(manifests, separators=(",", ":")))
    temporary.replace(destination)


_GO_BUILDINFO_MAGIC = b"\xff Go buildinf:"
# Go 1.18+ writes the version and module strings inline after a 32-byte header.
_GO_BUILDINFO_INLINE = 0x2


def go_module_info(binary: Path) -> str:
    """The module information Go embeds in what it builds (as `go version -m` prints it).

    Empty for anything else. Read from the file, so checking a binary never runs it.
    """
    try:
        with binary.open("rb") as file:
            if os.fstat(file.fileno()).st_size < 64:
                return ""
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                at = data.find(_GO_BUILDINFO_MAGIC)
                while at % 16 and at != -1:  # the header is 16-byte aligned
                    at = data.find(_GO_BUILDINFO_MAGIC, at + 1)
                if at == -1 or not data[at + 15] & _GO_BUILDINFO_INLINE:
                    return ""
                position = at + 32
                strings: list[bytes] = []
                for _ in range(2):  # the Go version, then the module information
                    length, position = _uvarint(data, position)
                    strings.append(data[position : position + length])
                    position += length
    except (OSError, ValueError, IndexError):
        return ""
    info = strings[1]
    # Framed by 16-byte sentinels, the last one after a newline.
    if len(info) >= 33 and info[-17] == ord("\n"):
        info = info[16:-16]
    return info.decode(errors="replace")


def _uvarint(data: mmap.mmap, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ValueError("malformed varint")


def jobset_version(module_info: str) -> str | None:
    """The JobSet release a binary was built from: its module version, else the
    ``-X .../pkg/version.GitVersion=`` it was linked with; None when unknown."""
    for line in module_info.splitlines():
        fields = line.split("\t")
        is_jobset = fields[0] in ("mod", "dep") and fields[1:2] == [JOBSET_MODULE]
        if is_jobset and len(fields) > 2 and fields[2].startswith("v"):
            return fields[2]
    found = re.search(
        re.escape(JOBSET_MODULE) + r"/pkg/version\.GitVersion=([^\s'\"]+)", module_info
    )
    if found and found.group(1).startswith("v") and not found.group(1).startswith("v0.0.0"):
        return found.group(1)
    return None


def _check_jobset(binary: Path, *, hint: str) -> None:
    if not binary.exists():
        raise BinaryError(f"{binary} does not exist ({hint})")
    if binary.is_dir() or not os.access(binary, os.X_OK):
        raise BinaryError(f"{binary} is not an executable file ({hint})")
    info = go_module_info(binary)
    names_jobset = any(
        line.split("\t")[1:2] == [JOBSET_MODULE]
        for line in info.splitlines()
        if line.startswith(("path\t", "mod\t", "dep\t"))
    )
    if not names_jobset:
        raise BinaryError(
            f"{binary} is not a JobSet controller (it carries no Go module information "
            f"naming {JOBSET_MODULE}) ({hint})"
        )
    version = jobset_version(info)
    wanted = _minor(JOBSET_VERSION)
    # A build of unknown version (a developer's checkout) is given the benefit of the doubt.
    if version is not None and not (version + ".").startswith(wanted + "."):
        raise BinaryError(f"{binary} is JobSet {version}, not {wanted}.x ({hint})")


def _go(
    what: str = "the Kubernetes binaries",
    alternative: str = "JOBRELAY_K8S_BIN_DIR to a directory holding kube-apiserver, "
    f"kube-controller-manager and kube-scheduler {K8S_VERSION}",
) -> str:
    go = shutil.which("go")
    if not go:
        raise BinaryError(
            f"Go is not installed, and {what} must be built from source: "
            "install Go 1.25+ (e.g. `apt-get install golang-go` or from go.dev), or set "
            + alternative
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
    upstream = Path(
        _download_module(go, "k8s.io/kubernetes", K8S_VERSION, workspace)["GoMod"]
    ).read_text()
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
