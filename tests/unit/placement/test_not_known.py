"""What is not known yet is typed (NotKnownYet): told apart from a refusal by its type,
never by its words, and said in an explanation like any other reason."""

from __future__ import annotations

from tests.unit.placement.support import pods

from jobrelay.placement.claims import WorkerClaims
from jobrelay.placement.decision import place
from jobrelay.placement.filters import FILTERS, Fits
from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.placement.workload import Workload

ANY = pods(1, cpu="1")


def test_each_unknown_is_typed() -> None:
    assert Fits().reject(Request(ANY), Cluster("w")) is NotKnownYet.CAPACITY
    assert WorkerNamespaces("m").refusal("team-a") is NotKnownYet.NAMESPACES
    assert WorkerClaims().refusal("team-a", ["data"]) is NotKnownYet.CLAIMS


def test_a_refusal_in_the_same_words_is_no_unknown() -> None:
    said = str(NotKnownYet.CAPACITY)
    assert said == "capacity not known yet"
    assert not isinstance(said, NotKnownYet)


def test_an_explanation_says_it_like_any_reason() -> None:
    decision = place([Cluster("w")], ANY, filters=FILTERS)
    (passed,) = decision.passed_over
    assert isinstance(passed.reason, NotKnownYet)
    assert decision.explain() == "w: capacity not known yet"


def test_claims_not_listed_pass_over_a_worker_for_now() -> None:
    workload = Workload(ANY.groups, ANY.choice, namespace="team-a", claims=("data",))
    decision = place([Cluster("w", claims=WorkerClaims())], workload)
    (passed,) = decision.passed_over
    assert passed.reason is NotKnownYet.CLAIMS and passed.by == "data"
