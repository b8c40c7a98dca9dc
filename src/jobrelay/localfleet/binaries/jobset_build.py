"""The JobSet controller, built with ``go build`` in a tiny module requiring
``sigs.k8s.io/jobset`` (``go install sigs.k8s.io/jobset@VERSION`` asks the proxy
for the module's version list, which the proxy refuses), or found in
``JOBRELAY_JOBSET_BINARY`` and recognised by the Go module information in it."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root, replace_dir
from jobrelay.localfleet.binaries.gomodule import (
    download_module,
    find_go,
    go_directive,
    module_info,
    run_go,
)
from jobrelay.localfleet.binaries.jobset_manifests import JOBSET_MANIFESTS, write_jobset_manifests
from jobrelay.localfleet.binaries.versions import JOBSET_MODULE, JOBSET_VERSION, minor_of

JOBSET_BINARY = "jobset-controller"
_JOBSET_GO_ALTERNATIVE = (
    f"JOBRELAY_JOBSET_BINARY to a JobSet controller {JOBSET_VERSION} binary with a "
    f"{JOBSET_MANIFESTS} next to it"
)


def jobset(progress: Progress, *, build: bool) -> tuple[Path, Path]:
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
        check_jobset(
            binary,
            hint=f"JOBRELAY_JOBSET_BINARY={explicit}: point it at a JobSet controller "
            f"{minor_of(JOBSET_VERSION)}.x (a Go build of {JOBSET_MODULE}), or unset it to use "
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
        with build_lock():
            if not manifests.is_file():
                go = find_go("the JobSet manifests", _JOBSET_GO_ALTERNATIVE)
                directory.mkdir(parents=True, exist_ok=True)
                module = download_module(go, JOBSET_MODULE, JOBSET_VERSION, _jobset_workspace())
                write_jobset_manifests(Path(module["Zip"]), manifests)
        return binary, manifests
    if binary.exists() and manifests.exists():
        return binary, manifests
    if not build:
        raise BinaryError(
            f"the JobSet controller is not built yet in {directory}: run `jobrelay fleet build`"
        )
    with build_lock():
        if not (binary.exists() and manifests.exists()):
            _build_jobset(directory, progress)
    return binary, manifests


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
    ``check_jobset`` recognises it; dependency versions are the release's own.
    """
    go = find_go("the JobSet controller", _JOBSET_GO_ALTERNATIVE)
    progress(
        f"building the JobSet controller {JOBSET_VERSION} from the Go module proxy "
        "(2-5 minutes once, later runs reuse it) ..."
    )
    workspace = _jobset_workspace()
    module = download_module(go, JOBSET_MODULE, JOBSET_VERSION, workspace)
    upstream = Path(module["GoMod"]).read_text()
    (workspace / "go.mod").write_text(
        "module jobrelay.dev/jobsetbuild\n\n"
        f"go {go_directive(upstream)}\n\n"
        f"require {JOBSET_MODULE} {JOBSET_VERSION}\n"
    )
    (workspace / "tools.go").write_text(
        f'//go:build tools\n\npackage jobsetbuild\n\nimport _ "{JOBSET_MODULE}"\n'
    )
    progress("resolving dependencies (go mod tidy) ...")
    run_go([go, "mod", "tidy"], cwd=workspace, env={}, progress=progress)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="jobset-", dir=directory.parent))
    try:
        write_jobset_manifests(Path(module["Zip"]), staging / JOBSET_MANIFESTS)
        version_package = f"{JOBSET_MODULE}/pkg/version"
        commit = (module.get("Origin") or {}).get("Hash", "")
        ldflags = f"-s -w -X {version_package}.GitVersion={JOBSET_VERSION}" + (
            f" -X {version_package}.GitCommit={commit}" if commit else ""
        )
        run_go(
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
    replace_dir(staging, directory)


def jobset_version(info: str) -> str | None:
    """The JobSet release a binary was built from: its module version, else the
    ``-X .../pkg/version.GitVersion=`` it was linked with; None when unknown."""
    for line in info.splitlines():
        fields = line.split("\t")
        is_jobset = fields[0] in ("mod", "dep") and fields[1:2] == [JOBSET_MODULE]
        if is_jobset and len(fields) > 2 and fields[2].startswith("v"):
            return fields[2]
    found = re.search(re.escape(JOBSET_MODULE) + r"/pkg/version\.GitVersion=([^\s'\"]+)", info)
    if found and found.group(1).startswith("v") and not found.group(1).startswith("v0.0.0"):
        return found.group(1)
    return None


def check_jobset(binary: Path, *, hint: str) -> None:
    """An executable Go build of the JobSet module, of the pinned minor release.

    Without Go to read its module information (`go version -m`), an executable
    file is given the benefit of the doubt: the override is how a machine
    without Go runs the fleet.
    """
    if not binary.exists():
        raise BinaryError(f"{binary} does not exist ({hint})")
    if binary.is_dir() or not os.access(binary, os.X_OK):
        raise BinaryError(f"{binary} is not an executable file ({hint})")
    info = module_info(binary)
    if info is None:
        return
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
    wanted = minor_of(JOBSET_VERSION)
    # A build of unknown version (a developer's checkout) is given the benefit of the doubt.
    if version is not None and not (version + ".").startswith(wanted + "."):
        raise BinaryError(f"{binary} is JobSet {version}, not {wanted}.x ({hint})")
