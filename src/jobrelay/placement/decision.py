"""``place``: filter the clusters, score those left, and explain every one passed over."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from jobrelay.placement.filters import FILTERS
from jobrelay.placement.model import Cluster, Filter, Request, Score
from jobrelay.placement.nodefit import Fit
from jobrelay.placement.scores import SCORES
from jobrelay.placement.workload import Choice, Strategy, Workload


@dataclass(frozen=True, slots=True)
class PassedOver:
    cluster: str
    reason: str
    # The filter that rejected it, or "score" when it fitted but another was preferred.
    by: str


@dataclass(frozen=True, slots=True)
class Decision:
    cluster: str | None
    passed_over: tuple[PassedOver, ...] = ()
    # Nothing chosen, and no allowed cluster could take the workload even empty: it
    # waits for a cluster that does not exist yet (NeverFits, not NotPlaced).
    never_fits: bool = False
    strategy: Strategy = Strategy.SPREAD
    # Where the chosen cluster's model puts the pods: (group, node, pods).
    placed: tuple[tuple[str, str, int], ...] = ()

    def explain(self) -> str:
        """Why each cluster was passed over: ``worker-1: ...; worker-2: ...``."""
        if not self.passed_over and self.cluster is None:
            return "no worker clusters are registered"
        return "; ".join(f"{p.cluster}: {p.reason}" for p in self.passed_over)


def _never_fits(request: Request, clusters: Sequence[Cluster], filters: Iterable[Filter]) -> bool:
    permanent = [f for f in filters if f.permanent]
    allowed = [c for c in clusters if all(f.reject(request, c) is None for f in permanent)]
    if not allowed:
        return False  # explained as excluded; a matching cluster may still be registered
    return all(
        c.capacity is not None and not c.capacity.empty.fit(request.workload.groups).fits
        for c in allowed
    )


def place(
    clusters: Iterable[Cluster],
    workload: Workload,
    policy: Choice | None = None,
    *,
    excluded: Mapping[str, str] | None = None,
    misfits: dict[tuple[str, str], Fit] | None = None,
    judge_never_fits: bool = True,
    filters: Sequence[Filter] = FILTERS,
    scores: Mapping[Strategy, Score] = SCORES,
) -> Decision:
    """Choose the cluster ``workload`` goes to, under its namespace's ``policy``.

    ``misfits`` shares failed fits between decisions while capacity only shrinks (a
    pass over held workloads); ``judge_never_fits`` False skips asking whether a
    workload that fits nowhere now ever could. Deterministic: clusters are judged in
    name order; ties go to the least loaded,
    then to the first name.
    """
    request = Request(workload, policy, excluded, misfits)
    ordered = sorted(clusters, key=lambda c: c.name)
    passed_over: list[PassedOver] = []
    eligible: list[Cluster] = []
    for cluster in ordered:
        for rule in filters:
            reason = rule.reject(request, cluster)
            if reason is not None:
                passed_over.append(PassedOver(cluster.name, reason, rule.name))
                break
        else:
            eligible.append(cluster)
    strategy = request.strategy
    if not eligible:
        never = judge_never_fits and _never_fits(request, ordered, filters)
        return Decision(None, tuple(passed_over), never, strategy)
    score = scores[strategy]
    ranked = sorted(eligible, key=lambda c: (-score.score(request, c), c.load, c.name))
    chosen = ranked[0]
    passed_over.extend(
        PassedOver(c.name, f"fits, but {strategy.value} placement preferred {chosen.name}", "score")
        for c in ranked[1:]
    )
    passed_over.sort(key=lambda p: p.cluster)
    fit = request.fit(chosen)
    return Decision(chosen.name, tuple(passed_over), False, strategy, fit.placed if fit else ())
