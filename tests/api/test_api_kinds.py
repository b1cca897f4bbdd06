"""Requesting a MIG slice and an AKS namespace through /api/v1/workspaces, in the emulator:
the kind's own form and service, by the API's field names; and the kubeconfig to connect."""

import uuid

import pytest

from clusters.backends.mig import DEFAULT_IMAGE
from tests.clusters.test_aks_workspaces import cluster, four_gpu_offering, make_pool  # noqa: F401
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)


def _post(client, body):
    return client.post(
        "/api/v1/workspaces",
        body,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )


def test_a_mig_slice_by_profile_runs_and_gives_a_kubeconfig(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    body = {"kind": "mig", "team": "vision", "name": "notebook", "mig_profile": "1g.10gb"}
    created = _post(client, body)
    assert created.status_code == 201, created.content
    ws = client.get(created.json()["url"]).json()
    assert ws["kind"] == "mig" and ws["mig_profile"] == "1g.10gb" and ws["gpu_model"] == "A100"
    assert ws["status"] == "running"
    assert ws["details"] == {"image": DEFAULT_IMAGE, "gpu_slices": 1}  # its kind's own
    connect = client.get(created.json()["url"] + "/connect").json()
    assert "apiVersion" in connect["kubeconfig"] and connect["ssh_command"] is None


def test_a_profile_no_pool_serves_is_400_naming_the_field(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    body = {"kind": "mig", "team": "vision", "name": "notebook", "mig_profile": "7g.80gb"}
    response = _post(client, body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["loc"] == ["body", "mig_profile"]
    assert not Workspace.objects.exists()


def test_a_namespace_by_gpu_model_and_count(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster, name="gpus", profile="", **four_gpu_offering())
    client.force_login(cast.researcher)
    body = {"kind": "namespace", "team": "vision", "name": "team-jobs", "gpus": 2,
            "gpu_model": "A100"}  # fmt: skip
    created = _post(client, body)
    assert created.status_code == 201, created.content
    ws = created.json()
    assert ws["kind"] == "namespace" and ws["gpu_count"] == 2
    assert ws["namespace"] == "vision-team-jobs"
    assert ws["details"] == {"gpu_quota": 2, "image": DEFAULT_IMAGE}  # its JupyterLab's
    refused = _post(client, body | {"name": "more", "gpus": 65})
    assert refused.status_code == 400 and refused.json()["errors"][0]["loc"][-1] == "gpus"
