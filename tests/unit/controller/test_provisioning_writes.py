"""The executor's capacity claims (controller/relay/provisioning_writes.py) against
in-memory apiservers: the PodTemplates then the request created in the workload's
namespace on the worker; deleted with the templates; a delete never stops the plan."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.unit.controller.builders import NAMESPACE, UID
from tests.unit.controller.test_executor import Env, make_env

from jobrelay.controller.relay.plan import CreateProvisioning, DeleteProvisioning, Retry
from jobrelay.controller.relay.steps.provisioning import provisioning_objects, request_name
from jobrelay.vocabulary import provisioning_api as api

REQUEST = request_name(UID)
TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async for value in make_env():
        yield value


def create() -> CreateProvisioning:
    templates, request = provisioning_objects(UID, NAMESPACE, [(TEMPLATE, 1)], api.CHECK_CAPACITY)
    return CreateProvisioning("w1", NAMESPACE, tuple(templates), request)


async def test_a_claim_is_its_templates_then_its_request_and_goes_with_them(env: Env) -> None:
    cluster = env.worker.cluster
    assert await env.run(create()) is None
    written = [(method, path) for method, path, _ in cluster.writes()]
    assert written[-2:] == [
        ("POST", f"/api/v1/namespaces/{NAMESPACE}/podtemplates"),
        ("POST", f"/apis/autoscaling.x-k8s.io/v1/namespaces/{NAMESPACE}/provisioningrequests"),
    ]
    assert cluster.get("provisioningrequests", f"{NAMESPACE}/{REQUEST}") is not None
    # Made again (a decision that did not see the first yet): what is there is ours.
    assert await env.run(create()) is None
    delete = DeleteProvisioning("w1", NAMESPACE, REQUEST, (f"{REQUEST}-0",), "placed on w2")
    assert await env.run(delete) is None
    assert cluster.get("provisioningrequests", f"{NAMESPACE}/{REQUEST}") is None
    assert cluster.get("podtemplates", f"{NAMESPACE}/{REQUEST}-0") is None
    # Gone already: nothing to say.
    assert await env.run(delete) is None


async def test_a_refused_claim_is_retried_and_a_failed_delete_does_not_stop_the_plan(
    env: Env,
) -> None:
    cluster = env.worker.cluster
    cluster.fail("POST", "/podtemplates", 403, "Forbidden")
    outcome = await env.run(create())
    assert isinstance(outcome, Retry) and "403" in outcome.why
    cluster.fail("DELETE", f"/provisioningrequests/{REQUEST}", 403, "Forbidden")
    delete = DeleteProvisioning("w1", NAMESPACE, REQUEST, (), "its Job is gone")
    assert await env.run(delete) is None
