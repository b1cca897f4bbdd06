"""A MIG slice runs a container environment of the catalog: the team's default when none is
chosen, the chosen one by slug from the API, or the researcher's own image only when it is
pinned; the workspace records which, and its pod runs that image. Celery runs eagerly; Azure
and Kubernetes are the emulator."""

import uuid

import pytest
from django.utils import timezone

from clusters.backends.mig import DEFAULT_IMAGE
from environments.demo import JUPYTER_PYTORCH, seed_demo_environments
from environments.services import environment_create
from tests.clusters.test_aks_workspaces import cluster, make_pool, request_mig  # noqa: F401
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)
PINNED = "ghcr.io/example/lab@sha256:" + "ab" * 32


def test_without_a_catalog_the_slice_runs_the_pinned_default_image(cast, cluster, sim):  # noqa: F811
    make_pool(cast, cluster)
    ws = request_mig(cast)
    assert ws.image == DEFAULT_IMAGE and not DEFAULT_IMAGE.endswith("latest")
    assert ws.environment is None


def test_the_teams_default_container_environment_is_taken_and_recorded(cast, cluster, sim):  # noqa: F811
    make_pool(cast, cluster)
    seed_demo_environments(now=timezone.now())
    ws = request_mig(cast)
    assert ws.image == JUPYTER_PYTORCH
    assert ws.environment.slug == ws.environment_recipe["slug"]
    assert ws.environment_recipe["container_image"] == JUPYTER_PYTORCH


def test_the_api_chooses_an_environment_and_refuses_a_moving_image(client, cast, cluster, sim):  # noqa: F811
    make_pool(cast, cluster)
    seed_demo_environments(now=timezone.now())
    mine = environment_create(
        actor=cast.team_admin,
        team=cast.team,
        values={
            "name": "Our lab image",
            "slug": "our-lab",
            "kinds": ["mig"],
            "container_image": PINNED,
        },
        now=timezone.now(),
    )
    client.force_login(cast.researcher)
    body = {"kind": "mig", "team": "vision", "mig_profile": "1g.10gb", "name": "nb"}

    def post(**extra):
        key = {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())}
        data = {**body, **extra}
        return client.post("/api/v1/workspaces", data, content_type="application/json", **key)

    created = post(environment="our-lab")
    assert created.status_code == 201, created.content
    ws = Workspace.objects.get(name="nb")
    assert (ws.image, ws.environment_id) == (PINNED, mine.pk)
    moving = post(name="moving", image="quay.io/jupyter/pytorch-notebook:cuda12-latest")
    assert moving.status_code == 400
    assert "moves as new images are pushed" in moving.content.decode()
    assert not Workspace.objects.filter(name="moving").exists()
