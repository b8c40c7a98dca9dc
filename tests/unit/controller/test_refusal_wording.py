"""What a refused write tells the user: chosen by the plan (refusal_wording.py), filled
in by the executor with what it knows. The executor decides nothing: a plan that names
other words, or other annotations to clear, gets exactly those."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
from tests.unit.controller.builders import JOB, job
from tests.unit.controller.test_executor import Env, create_action, make_env, rv

from jobrelay.controller.relay.plan import Place, Terminal
from jobrelay.controller.relay.refusal_wording import (
    DEPENDENCY_NOT_COPIED,
    MIRROR_REJECTED,
    MIRROR_UPDATE_REJECTED,
    STATUS_REFUSED,
    IfRefused,
    RefusalAnswer,
)
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION, PREEMPTED_BY_ANNOTATION

FACTS = {
    "cluster": "w1",
    "namespace": "team-a",
    "kind": "Job",
    "api_version": "batch/v1",
    "dependency": "configmap/settings",
    "refusal": "HTTP 403 Forbidden: a policy there refuses it",
}
SAID = "jobs.batch is forbidden: User x cannot create resource"


@pytest.mark.parametrize(
    ("wording", "answer", "message"),
    [
        (MIRROR_REJECTED, RefusalAnswer.NO_NAMESPACE, "worker cluster w1 has no namespace team-a (and "
         "namespace creation is turned off): create it there"),
        (MIRROR_REJECTED, RefusalAnswer.NOT_SERVED, "worker cluster w1 answered NotFound to the mirror "
         "Job in namespace team-a, which exists: does it serve batch/v1?"),
        (MIRROR_REJECTED, RefusalAnswer.UNREACHABLE, "worker cluster w1 is unreachable"),
        (MIRROR_REJECTED, RefusalAnswer.REFUSED, "worker cluster w1 rejected the mirror Job (HTTP 403 "
         "Forbidden: a policy there refuses it)"),
        (MIRROR_UPDATE_REJECTED, RefusalAnswer.REFUSED, "worker cluster w1 refused to apply this change "
         "to the mirror (HTTP 403 Forbidden: a policy there refuses it)"),
        # A refusal with no words of its own for an answer says it as refused.
        (MIRROR_UPDATE_REJECTED, RefusalAnswer.UNREACHABLE, "worker cluster w1 refused to apply this "
         "change to the mirror (HTTP 403 Forbidden: a policy there refuses it)"),
        (DEPENDENCY_NOT_COPIED, RefusalAnswer.REFUSED, "worker cluster w1 refused the copy of "
         "configmap/settings (HTTP 403 Forbidden: a policy there refuses it)"),
    ],
)  # fmt: skip
def test_a_worker_refusal_in_a_tenant_s_words(
    wording: IfRefused, answer: RefusalAnswer, message: str
) -> None:
    terminal = wording.terminal(answer, FACTS, retry_after=30.0, answered=SAID)
    # The worker's own words go to the log only: a tenant reads the message.
    assert terminal == Terminal(wording.reason, message, retry_after=30.0, detail=SAID)


def test_a_status_the_manager_refuses_quotes_it_and_waits_for_a_change() -> None:
    terminal = STATUS_REFUSED.terminal(
        RefusalAnswer.REFUSED, FACTS, retry_after=30.0, answered=SAID
    )
    assert terminal == Terminal(
        "StatusNotCopied",
        "the management apiserver refused the status jobrelay computed (a jobrelay bug, "
        f"please report it): {SAID}",
    )


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async for value in make_env():
        yield value


async def test_a_placement_clears_what_the_plan_names(env: Env) -> None:
    waiting = {NOT_PLACED_ANNOTATION: "NotPlaced: w1: full", PREEMPTED_BY_ANNOTATION: "Job x"}
    env.manager.put("jobs", job(rv=rv(env), annotations=waiting))
    assert await env.run(Place("w1", rv(env), clears=(PREEMPTED_BY_ANNOTATION,))) is None
    annotations = env.stored_job()["metadata"]["annotations"]
    assert annotations[NOT_PLACED_ANNOTATION] == "NotPlaced: w1: full"
    assert PREEMPTED_BY_ANNOTATION not in annotations
    assert await env.run(Place("w1", rv(env))) is None  # by default, both
    assert NOT_PLACED_ANNOTATION not in env.stored_job()["metadata"]["annotations"]


async def test_a_refused_create_says_what_the_plan_names(env: Env) -> None:
    env.worker.cluster.fail("POST", "/jobs", 403, "Forbidden")
    mine = IfRefused(
        "Refused", {RefusalAnswer.REFUSED: "{kind} {namespace} on {cluster}: {refusal}"}
    )
    outcome = await env.run(dataclasses.replace(create_action(env), if_refused=mine), obj=job())
    assert isinstance(outcome, Terminal)
    assert outcome.reason == "Refused"
    assert outcome.message.startswith(f"{JOB.ref.kind} team-a on w1: HTTP 403 Forbidden")
