"""The binaries in jobrelay's cache, as `go version -m` reads them: the JobSet controller
is recognised by its module information, and nothing else passes for it."""

from __future__ import annotations

import shutil

import pytest

from jobrelay.localfleet.binaries import BinaryError, resolver
from jobrelay.localfleet.binaries.gomodule import module_info
from jobrelay.localfleet.binaries.jobset_build import check_jobset, jobset_version
from jobrelay.localfleet.binaries.versions import JOBSET_MODULE, JOBSET_VERSION

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("go") is None, reason="`go version -m` needs Go"),
]


def test_the_built_jobset_controller_carries_its_release_in_its_module_information() -> None:
    built = resolver.resolve(build=False)
    info = module_info(built.jobset_controller)
    assert info is not None
    assert f"mod\t{JOBSET_MODULE}\t{JOBSET_VERSION}\t" in info
    assert jobset_version(info) == JOBSET_VERSION
    check_jobset(built.jobset_controller, hint="h")


def test_another_go_binary_is_not_taken_for_the_jobset_controller() -> None:
    built = resolver.resolve(build=False)
    info = module_info(built.kwok)
    assert info is not None and info.startswith("path\tsigs.k8s.io/kwok/cmd/kwok\n")
    with pytest.raises(BinaryError, match=r"kwok is not a JobSet controller"):
        check_jobset(built.kwok, hint="h")
