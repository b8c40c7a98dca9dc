"""The chart's admission policies on the local fleet's manager (a v1.35 apiserver).

The policies name the controller's ServiceAccount; here the controller runs
with the fleet's admin certificate (user ``jobrelay-admin``), so the loaded
YAML names that user instead, and "a user" is the admin-equivalent bearer-token
user (``jobrelay-token-admin``, system:masters: RBAC lets it do anything, so
every refusal below is the policy's). The Pod policy is bound to the
token user, so that the fleet's own admin keeps creating Pods.

Policies take a moment to load after they are created: each fixture waits,
with a deadline, until a request the policy refuses is refused (and, after
deleting it, until that request passes again, so later tests find the manager
as it was).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, PODS
from jobrelay.manifests.admission_policy import admission_policy_yaml
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    FIELD_MANAGER,
    MIRRORS_ANNOTATION,
    PLACEMENTS_ANNOTATION,
)
from jobrelay.vocabulary.resource import Resource
from tests.chart_render import chart_tools, helm_template_text
from tests.e2e.support import Relay
from tests.e2e.test_generic_kind import GROUP as SLEEPER_GROUP
from tests.e2e.test_generic_kind import SLEEPERS
from tests.e2e.test_generic_kind import _install_crd as install_sleeper_crd
from tests.e2e.test_generic_kind import _remove_crd as remove_sleeper_crd
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

# The chart's kinds for this test: Job and JobSet (the placement policy matches both).
CHART_VALUES = {"kinds": [{"name": "Job.v1.batch"}, {"name": "JobSet.v1alpha2.jobset.x-k8s.io"}]}
DEPLOYED_CONTROLLER = "system:serviceaccount:jobrelay-system:jobrelay"
TEST_CONTROLLER = "jobrelay-admin"  # the admin client certificate's CN
TOKEN_USER = "jobrelay-token-admin"
POLICIES = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy", namespaced=False,
)  # fmt: skip
BINDINGS = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding", namespaced=False,
)  # fmt: skip
PLACEMENT_REFUSAL = "only the jobrelay controller may place a Job"
POD_REFUSAL = "may create Pods only as a dry run"
RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


def chart_policies() -> str:
    """templates/admission-policies.yaml as `helm template` renders it."""
    return helm_template_text(
        chart_tools().helm, CHART_VALUES, release="jobrelay", namespace="jobrelay-system",
        extra=("--show-only", "templates/admission-policies.yaml"),
    )  # fmt: skip


Probe = Callable[[], Awaitable[bool]]  # True: the request was refused by the policy


def policy_documents(
    policy: str, controller: str, shipped: str | None = None
) -> list[dict[str, Any]]:
    """The policy named ``policy`` and its binding, naming ``controller`` as the controller,
    from ``shipped`` (the text of the policies; default: the chart's, installed as release
    ``jobrelay`` in jobrelay-system)."""
    text = (shipped or chart_policies()).replace(DEPLOYED_CONTROLLER, controller)
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    chosen = [doc for doc in documents if doc["metadata"]["name"] == policy]
    assert [doc["kind"] for doc in chosen] == [POLICIES.kind, BINDINGS.kind]
    return chosen


def refused_by_policy(error: ApiError, message: str) -> bool:
    return error.code == 403 and message in error.message


@contextlib.asynccontextmanager
async def applied(
    manager: ApiClient,
    policy: str,
    controller: str,
    refused: Probe,
    *,
    timeout: float = 60.0,
    shipped: str | None = None,
) -> AsyncIterator[None]:
    """The policy in force for the block; deleted, and seen lifted, after."""
    policy_doc, binding = policy_documents(policy, controller, shipped)
    try:
        for resource, doc in ((POLICIES, policy_doc), (BINDINGS, binding)):
            await manager.patch(
                resource, doc["metadata"]["name"], doc, patch_type=PatchType.APPLY,
                field_manager=FIELD_MANAGER, force=True,
            )  # fmt: skip

        async def type_checked() -> dict[str, Any] | None:
            stored = await manager.get(POLICIES, policy)
            status = stored.get("status") or {}
            seen = status.get("observedGeneration") == stored["metadata"]["generation"]
            return status if seen and "typeChecking" in status else None

        status = await eventually(type_checked, timeout=timeout, what=f"{policy} type-checked")
        assert not status["typeChecking"].get("expressionWarnings"), status
        await eventually(refused, timeout=timeout, what=f"{policy} in force")
        yield
    finally:
        for resource in (BINDINGS, POLICIES):
            with contextlib.suppress(ApiError):
                await manager.delete(resource, policy)

        async def lifted() -> bool:
            return not await refused()

        await eventually(lifted, timeout=timeout, what=f"{policy} lifted")


def managed_job(
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    template_annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    body = job_manifest(name, managed_by="jobrelay.dev/relay", annotations=template_annotations)
    if annotations:
        body["metadata"]["annotations"] = annotations
    return body


async def user_may_not_place(user: ApiClient, namespace: str) -> bool:
    """Whether the placement policy refuses ``user`` a Job created already placed (a dry run)."""
    probe = managed_job("policy-probe", {CLUSTER_ANNOTATION: "worker-1"})
    try:
        await user.create(JOBS, probe, namespace=namespace, dry_run=True)
    except ApiError as error:
        if refused_by_policy(error, PLACEMENT_REFUSAL):
            return True
        raise
    return False


@pytest.fixture
async def placement_policy(
    clients: dict[str, ApiClient], user: ApiClient, namespace: str
) -> AsyncIterator[None]:
    async def refused() -> bool:
        return await user_may_not_place(user, namespace)

    async with applied(clients["manager"], "jobrelay-placement", TEST_CONTROLLER, refused):
        yield


async def test_a_user_cannot_create_a_job_already_placed(
    placement_policy: None, user: ApiClient, namespace: str
) -> None:
    for key in (CLUSTER_ANNOTATION, PLACEMENTS_ANNOTATION, MIRRORS_ANNOTATION):
        with pytest.raises(ApiError) as refused:
            await user.create(JOBS, managed_job("preset", {key: "worker-1"}), namespace=namespace)
        assert refused_by_policy(refused.value, PLACEMENT_REFUSAL), refused.value
        assert f"{key} may not be set or changed by {TOKEN_USER}" in refused.value.message
    # Jobs jobrelay does not manage are none of its business.
    unmanaged = job_manifest("unmanaged", suspend=True)
    unmanaged["metadata"]["annotations"] = {CLUSTER_ANNOTATION: "anything"}
    await user.create(JOBS, unmanaged, namespace=namespace)


async def test_only_the_controller_places_a_job_and_a_user_keeps_every_other_right(
    placement_policy: None, relay: Relay, user: ApiClient
) -> None:
    namespace = relay.namespace
    # The user's own annotations are fine; the controller places the Job regardless.
    await user.create(
        JOBS, managed_job("moved", {"team": "a"}, template_annotations=RUN_FOREVER),
        namespace=namespace,
    )  # fmt: skip
    placed = await relay.wait_placed("moved")
    other = next(worker for worker in relay.workers if worker != placed)

    for change in (
        {CLUSTER_ANNOTATION: other},  # move it
        {CLUSTER_ANNOTATION: None},  # unplace it
        {PLACEMENTS_ANNOTATION: f"{placed},{other}"},
        {MIRRORS_ANNOTATION: f"1:{other}:a-uid-of-its-choosing"},  # follow another mirror
    ):
        with pytest.raises(ApiError) as refused:
            await user.patch(
                JOBS, "moved", {"metadata": {"annotations": change}}, namespace=namespace
            )
        assert refused_by_policy(refused.value, PLACEMENT_REFUSAL), refused.value
    job = await user.patch(
        JOBS, "moved", {"metadata": {"annotations": {"team": "b", "note": "x"}}},
        namespace=namespace,
    )  # fmt: skip
    assert job["metadata"]["annotations"][CLUSTER_ANNOTATION] == placed
    await user.delete(JOBS, "moved", namespace=namespace, propagation_policy="Background")
    await relay.wait_gone("moved")

    # End to end under the policy: placed (annotations written by the controller), run,
    # status copied back.
    await user.create(JOBS, managed_job("runs"), namespace=namespace)
    done = await relay.verify("runs", outcome="Complete")
    assert done.cluster in relay.workers


async def test_a_user_cannot_place_a_job_through_its_status_subresource(
    placement_policy: None, user: ApiClient, clients: dict[str, ApiClient], namespace: str
) -> None:
    """Kubernetes keeps the metadata edits a status update carries: the policy matches
    jobs/status too, or a cluster admin could move a Job through it."""
    # Suspended: nothing runs, and no controller of this module acts on it meanwhile.
    job = managed_job("via-status")
    job["spec"]["suspend"] = True
    await clients["manager"].create(JOBS, job, namespace=namespace)  # the controller's identity
    for change in ({CLUSTER_ANNOTATION: "worker-1"}, {PLACEMENTS_ANNOTATION: "worker-1"}):
        with pytest.raises(ApiError) as refused:
            await user.patch(
                JOBS, "via-status", {"metadata": {"annotations": change}},
                namespace=namespace, subresource="status",
            )  # fmt: skip
        assert refused_by_policy(refused.value, PLACEMENT_REFUSAL), refused.value
    stored = await user.get(JOBS, "via-status", namespace=namespace)
    annotations = stored["metadata"].get("annotations") or {}
    assert CLUSTER_ANNOTATION not in annotations and PLACEMENTS_ANNOTATION not in annotations
    # Other metadata edits through the status subresource remain the user's.
    edited = await user.patch(
        JOBS, "via-status", {"metadata": {"annotations": {"team": "b"}}},
        namespace=namespace, subresource="status",
    )  # fmt: skip
    assert edited["metadata"]["annotations"]["team"] == "b"


@pytest.fixture
async def sleeper_crd(clients: dict[str, ApiClient]) -> AsyncIterator[None]:
    """test_generic_kind's CRD (with a status subresource) on the manager, for this test."""
    await install_sleeper_crd(clients["manager"])
    try:
        yield
    finally:
        await remove_sleeper_crd(clients["manager"])


async def test_the_generated_policy_covers_a_crd_kind_and_its_status_subresource(
    sleeper_crd: None, user: ApiClient, clients: dict[str, ApiClient], namespace: str
) -> None:
    """`jobrelay manifests admission-policy --kind` for a CRD with a status subresource:
    neither the object nor its status carries a user's placement."""
    shipped = admission_policy_yaml([f"Sleeper.v1.{SLEEPER_GROUP}"])
    sleeper = {
        "apiVersion": f"{SLEEPER_GROUP}/v1",
        "kind": "Sleeper",
        "metadata": {"name": "nap"},
        "spec": {"managedBy": "jobrelay.dev/relay", "suspend": True, "seconds": 1},
    }

    async def refused() -> bool:
        probe = {**sleeper, "metadata": {"name": "probe", "annotations": {CLUSTER_ANNOTATION: "w"}}}
        try:
            await user.create(SLEEPERS, probe, namespace=namespace, dry_run=True)
        except ApiError as error:
            if refused_by_policy(error, "only the jobrelay controller may place a Sleeper"):
                return True
            raise
        return False

    async with applied(
        clients["manager"], "jobrelay-placement", TEST_CONTROLLER, refused, shipped=shipped
    ):
        await clients["manager"].create(SLEEPERS, sleeper, namespace=namespace)
        change = {"metadata": {"annotations": {CLUSTER_ANNOTATION: "worker-1"}}}
        with pytest.raises(ApiError) as denied:
            await user.patch(SLEEPERS, "nap", change, namespace=namespace)
        assert refused_by_policy(denied.value, PLACEMENT_REFUSAL.replace("Job", "Sleeper"))
        # A custom resource's status update drops metadata edits (unlike a Job's, which
        # keeps them; the policy matches <plural>/status for both): nothing is stored.
        await user.patch(SLEEPERS, "nap", change, namespace=namespace, subresource="status")
        stored = await user.get(SLEEPERS, "nap", namespace=namespace)
        assert CLUSTER_ANNOTATION not in (stored["metadata"].get("annotations") or {})


@pytest.fixture
async def pods_policy(
    clients: dict[str, ApiClient], user: ApiClient, namespace: str
) -> AsyncIterator[None]:
    """The Pod policy, naming the token user as the controller."""

    async def refused() -> bool:
        pod = pod_manifest("policy-probe")
        try:
            await user.create(PODS, pod, namespace=namespace)
        except ApiError as error:
            if refused_by_policy(error, POD_REFUSAL):
                return True
            raise
        await clients["manager"].delete(PODS, "policy-probe", namespace=namespace)
        return False

    async with applied(clients["manager"], "jobrelay-pods-dry-run-only", TOKEN_USER, refused):
        yield


def pod_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


async def test_the_controller_creates_pods_only_as_a_dry_run(
    pods_policy: None, user: ApiClient, clients: dict[str, ApiClient], namespace: str
) -> None:
    judged = await user.create(PODS, pod_manifest("judged"), namespace=namespace, dry_run=True)
    assert judged["metadata"]["name"] == "judged"
    with pytest.raises(ApiError) as refused:
        await user.create(PODS, pod_manifest("run"), namespace=namespace)
    assert refused_by_policy(refused.value, POD_REFUSAL), refused.value
    with pytest.raises(ApiError) as missing:
        await clients["manager"].get(PODS, "judged", namespace=namespace)
    assert missing.value.is_not_found


# -- how big a delegated workload may be (issue 33) ------------------------------------

SIZE_REFUSAL = "jobrelay takes for a delegated workload"


def refused_for_size(error: ApiError) -> bool:
    # The policy's reason, RequestEntityTooLarge, answers 413.
    return error.code == 413 and SIZE_REFUSAL in error.message


def with_env(job: dict[str, Any], characters: int) -> dict[str, Any]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [*container.get("env", []), {"name": "BULK", "value": "<" * characters}]
    return job


@pytest.fixture
async def size_policy(
    clients: dict[str, ApiClient], user: ApiClient, namespace: str
) -> AsyncIterator[None]:
    async def refused() -> bool:
        try:
            await user.create(
                JOBS, with_env(managed_job("size-probe"), 300_000), namespace=namespace,
                dry_run=True,
            )  # fmt: skip
        except ApiError as error:
            if refused_for_size(error):
                return True
            raise
        return False

    async with applied(clients["manager"], "jobrelay-workload-size", TEST_CONTROLLER, refused):
        yield


async def test_a_delegated_workload_over_256_kib_of_text_is_refused(
    size_policy: None, user: ApiClient, clients: dict[str, ApiClient], namespace: str
) -> None:
    # Under the limit, in any of the counted fields: taken.
    await user.create(JOBS, with_env(managed_job("env-under"), 250_000), namespace=namespace,
                      dry_run=True)  # fmt: skip
    # Over it: in an env value, or summed over the fields counted (annotations alone may
    # hold 256 KiB: the apiserver's own limit).
    over = [
        with_env(managed_job("env-over"), 262_145),
        with_env(managed_job("template-over", template_annotations={"b": "<" * 200_000}), 70_000),
        with_env(managed_job("annotations-over", {"bulk": "<" * 200_000}), 70_000),
    ]
    for job in over:
        with pytest.raises(ApiError) as refused:
            await user.create(JOBS, job, namespace=namespace, dry_run=True)
        assert refused_for_size(refused.value), refused.value
        assert f"Job {job['metadata']['name']} holds " in refused.value.message
    # Grown past it later, through the object or its status subresource: refused too.
    small = with_env(managed_job("grows"), 100_000)
    small["spec"]["suspend"] = True
    await user.create(JOBS, small, namespace=namespace)
    grow = {"metadata": {"annotations": {"bulk": "<" * 200_000}}}
    for subresource in (None, "status"):
        with pytest.raises(ApiError) as refused:
            await user.patch(JOBS, "grows", grow, namespace=namespace, subresource=subresource)
        assert refused_for_size(refused.value), refused.value
    # Jobs jobrelay does not manage are none of its business; the controller is not held
    # to it (it writes only what the workload already carries).
    unmanaged = with_env(job_manifest("unmanaged-big", suspend=True), 300_000)
    await user.create(JOBS, unmanaged, namespace=namespace, dry_run=True)
    await clients["manager"].create(JOBS, over[0], namespace=namespace, dry_run=True)
