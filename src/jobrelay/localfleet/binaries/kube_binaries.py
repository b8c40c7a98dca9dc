"""kube-apiserver, kube-controller-manager and kube-scheduler, built from
``k8s.io/kubernetes`` used as a Go module (its staging modules replaced by their
published v0.x releases), or found in ``JOBRELAY_K8S_BIN_DIR``."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from jobrelay.localfleet.binaries import BinaryError, Progress
from jobrelay.localfleet.binaries.build_cache import build_lock, cache_root, replace_dir
from jobrelay.localfleet.binaries.gomodule import download_module, find_go, go_directive, run_go
from jobrelay.localfleet.binaries.version_probe import first_line, version_of
from jobrelay.localfleet.binaries.versions import K8S_STAGING_VERSION, K8S_VERSION, minor_of

K8S_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def kubernetes_dir(progress: Progress, *, build: bool) -> Path:
    """The directory holding every component, building them when missing and ``build``."""
    explicit = os.environ.get("JOBRELAY_K8S_BIN_DIR")
    if explicit:
        directory = Path(explicit)
        hint = (
            f"JOBRELAY_K8S_BIN_DIR={explicit}: point it at a directory holding "
            f"{', '.join(K8S_COMPONENTS)} {minor_of(K8S_VERSION)}.x, "
            "or unset it to use jobrelay's own build"
        )
        if not directory.is_dir():
            raise BinaryError(f"{directory} is not a directory ({hint})")
        check_kubernetes(directory, hint=hint)
        return directory
    directory = cache_root() / "bin" / f"k8s-{K8S_VERSION}"
    rebuild = f"delete {directory} and run `jobrelay fleet build` to rebuild"
    if all((directory / name).exists() for name in K8S_COMPONENTS):
        check_kubernetes(directory, hint=rebuild)
        return directory
    if not build:
        raise BinaryError(
            f"Kubernetes binaries are not built yet in {directory}: run `jobrelay fleet build`"
        )
    with build_lock():
        if not all((directory / name).exists() for name in K8S_COMPONENTS):
            _build_kubernetes(directory, progress)
    check_kubernetes(directory, hint=rebuild)
    return directory


def check_kubernetes(directory: Path, *, hint: str) -> None:
    """Every component present and of the right minor version; all problems in one message."""
    wanted = minor_of(K8S_VERSION)  # v1.35: any patch release of the minor works
    problems: list[str] = []
    for name in K8S_COMPONENTS:
        binary = directory / name
        try:
            version = version_of(binary)
        except BinaryError as error:
            problems.append(str(error))
            continue
        match = re.search(r"v\d+\.\d+\.\d+\S*", version)
        if not match or not (match.group(0) + ".").startswith(wanted + "."):
            problems.append(f"{binary} reports {first_line(version)}, not Kubernetes {wanted}.x")
    if problems:
        raise BinaryError(
            f"jobrelay's local fleet needs Kubernetes {wanted}.x, but:\n  "
            + "\n  ".join(problems)
            + f"\nTo fix: {hint}."
        )


def _build_kubernetes(directory: Path, progress: Progress) -> None:
    go = find_go()
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
    run_go(
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
    replace_dir(staging, directory)


def _write_build_module(workspace: Path, go: str, progress: Progress) -> None:
    """A Go module requiring k8s.io/kubernetes, with each staging module pinned.

    k8s.io/kubernetes's own go.mod replaces its staging modules with local
    paths that do not exist in the module zip; pointing each at its published
    release is what makes the module buildable from the proxy.
    """
    progress(f"resolving k8s.io/kubernetes@{K8S_VERSION} on the Go module proxy ...")
    upstream = Path(
        download_module(go, "k8s.io/kubernetes", K8S_VERSION, workspace)["GoMod"]
    ).read_text()
    staging_modules = re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", upstream, re.M)
    replaces = "\n".join(f"\t{name} => {name} {K8S_STAGING_VERSION}" for name in staging_modules)
    (workspace / "go.mod").write_text(
        "module jobrelay.dev/k8sbuild\n\n"
        f"go {go_directive(upstream)}\n\n"
        f"require k8s.io/kubernetes {K8S_VERSION}\n\n"
        f"replace (\n{replaces}\n)\n"
    )
    (workspace / "tools.go").write_text(
        "//go:build tools\n\npackage k8sbuild\n\nimport (\n"
        + "".join(f'\t_ "k8s.io/kubernetes/cmd/{name}"\n' for name in K8S_COMPONENTS)
        + ")\n"
    )
    progress("resolving dependencies (go mod tidy) ...")
    run_go([go, "mod", "tidy"], cwd=workspace, env={}, progress=progress)
