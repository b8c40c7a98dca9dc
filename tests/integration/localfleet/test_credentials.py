"""Every local cluster takes both credential kinds a worker's kubeconfig may carry: the
admin client certificate and static bearer tokens (an admin-equivalent user, and a
user no RBAC rule grants anything)."""

from __future__ import annotations

import pytest
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS
from jobrelay.localfleet.cluster import TOKEN_USERS
from jobrelay.localfleet.cluster_files import Credential
from tests.conftest import FleetHandle

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("credential", [Credential.CERT, Credential.TOKEN])
async def test_admin_credentials_may_do_anything_on_every_cluster(
    fleet: FleetHandle, credential: Credential
) -> None:
    for name in fleet.clusters:
        async with ApiClient.from_kubeconfig(fleet.kubeconfig(name, credential)) as client:
            assert (await client.version())["gitVersion"].startswith("v1.35.")
            await client.list(JOBS)


async def test_the_no_rights_token_is_known_but_may_list_nothing(fleet: FleetHandle) -> None:
    user = TOKEN_USERS[Credential.NO_RIGHTS_TOKEN].name
    for name in fleet.clusters:
        path = fleet.kubeconfig(name, Credential.NO_RIGHTS_TOKEN)
        async with ApiClient.from_kubeconfig(path) as client:
            await client.version()  # every authenticated user may read it
            with pytest.raises(ApiError) as refused:
                await client.list(JOBS)
            assert refused.value.code == 403, refused.value
            assert f'User "{user}" cannot list resource "jobs"' in refused.value.message


async def test_an_unknown_token_is_refused(fleet: FleetHandle) -> None:
    config = yaml.safe_load(fleet.kubeconfig(fleet.workers[0], Credential.TOKEN).read_text())
    config["users"][0]["user"]["token"] = "not-a-token-of-this-cluster"
    async with ApiClient.from_kubeconfig_dict(config) as client:
        with pytest.raises(ApiError) as refused:
            await client.version()
        assert refused.value.code == 401, refused.value
