"""Which kubeconfig is whose on `clusters add` (target_rules, pure): --kubeconfig/--context
are the manager's, except in the deprecated `add NAME --kubeconfig WORKER` spelling."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.cli.target_rules import GivenFlags, TargetError, add_targets

W, M, G = Path("worker"), Path("manager"), Path("group")


@pytest.mark.parametrize(
    ("given", "worker", "manager", "deprecated"),
    [
        # the new spelling: --kubeconfig/--context on add are the manager's, before the group's
        (GivenFlags(worker_kubeconfig=W), (W, None), (None, None), 0),
        (GivenFlags(worker_kubeconfig=W, worker_context="wc"), (W, "wc"), (None, None), 0),
        (GivenFlags(W, "wc", M, "mc", G, "gc"), (W, "wc"), (M, "mc"), 0),
        (GivenFlags(W, None, None, None, G, "gc"), (W, None), (G, "gc"), 0),
        (GivenFlags(W, None, None, "mc", G, "gc"), (W, None), (G, "mc"), 0),
        # the old spelling: --kubeconfig (and --context) on add are the worker's, with a warning
        (GivenFlags(kubeconfig=W), (W, None), (None, None), 1),
        (GivenFlags(kubeconfig=W, context="wc"), (W, "wc"), (None, None), 2),
        (GivenFlags(kubeconfig=W, worker_context="wc"), (W, "wc"), (None, None), 1),
        (GivenFlags(None, None, W, "wc", G, "gc"), (W, "wc"), (G, "gc"), 2),
    ],
)
def test_whose_kubeconfig(
    given: GivenFlags,
    worker: tuple[Path, str | None],
    manager: tuple[Path | None, str | None],
    deprecated: int,
) -> None:
    targets = add_targets(given)
    assert (targets.worker_kubeconfig, targets.worker_context) == worker
    assert (targets.manager_kubeconfig, targets.manager_context) == manager
    assert len(targets.deprecations) == deprecated
    assert all("--worker-" in line for line in targets.deprecations)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (GivenFlags(), "--worker-kubeconfig FILE"),
        (GivenFlags(group_kubeconfig=G), "--worker-kubeconfig FILE"),
        (GivenFlags(kubeconfig=W, context="a", worker_context="b"), "--context is the worker's"),
    ],
)
def test_unclear_flags_are_refused(given: GivenFlags, said: str) -> None:
    with pytest.raises(TargetError, match=said):
        add_targets(given)


paths = st.none() | st.sampled_from([W, M, G])
contexts = st.none() | st.sampled_from(["a", "b"])


@given(st.builds(GivenFlags, paths, contexts, paths, contexts, paths, contexts))
def test_the_worker_never_gets_the_groups_kubeconfig(given: GivenFlags) -> None:
    try:
        targets = add_targets(given)
    except TargetError:
        return
    assert targets.worker_kubeconfig in (given.worker_kubeconfig, given.kubeconfig)
    assert targets.worker_kubeconfig is not None
    if given.group_kubeconfig is not None and given.kubeconfig is None:
        assert targets.manager_kubeconfig == given.group_kubeconfig
