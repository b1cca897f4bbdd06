"""/api/v1/environments: the same choices and default the request page offers."""

from datetime import UTC, datetime

import pytest

from environments.demo import seed_demo_environments
from environments.services import environment_hide

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def catalog(cast):
    return {e.slug: e for e in seed_demo_environments(now=NOW)}


def _list(client, **query):
    return client.get("/api/v1/environments", query)


def test_a_member_lists_what_drives_the_size_default_first(client, cast, catalog):
    client.force_login(cast.researcher)
    response = _list(client, team="vision", kind="vm", vm_size="Standard_NV12ads_A10_v5")
    assert response.status_code == 200
    (only,) = response.json()["items"]
    assert only["slug"] == "pytorch-a10" and only["default"] is True
    assert only["driver_method"] == "extension" and only["team"] is None
    assert only["vm_image"].startswith("Canonical:0001-com-ubuntu-server-jammy:")


def test_slices_get_the_container_and_hidden_entries_are_left_out(client, cast, catalog):
    client.force_login(cast.researcher)
    assert [i["slug"] for i in _list(client, team="vision", kind="mig").json()["items"]] == [
        "jupyter-pytorch-container"
    ]
    environment_hide(
        actor=cast.team_admin, team=cast.team, environment=catalog["cuda-minimal"], now=NOW
    )
    items = _list(client, team="vision", kind="vm", gpu_family="A100").json()["items"]
    assert [i["slug"] for i in items] == ["pytorch-cuda"]


def test_another_teams_list_is_404_and_a_missing_kind_400(client, cast, catalog):
    client.force_login(cast.outsider)
    assert _list(client, team="vision", kind="vm").status_code == 404
    assert _list(client, team="nlp").status_code == 400


JAX = {
    "team": "vision",
    "name": "JAX on A100",
    "slug": "jax-a100",
    "kinds": ["vm"],
    "vm_image": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202510230",
    "driver_method": "extension",
    "gpu_families": ["A100"],
    "extension_settings": {"A100": {"installCUDA": True}},
    "layer": {"pip": ["jax[cuda12]==0.4.35"]},
    "contents": {"frameworks": {"JAX": "0.4.35"}},
}


def _add(client, body):
    return client.post("/api/v1/environments", body, content_type="application/json")


def test_a_team_admin_adds_their_teams_own_and_members_can_choose_it(client, cast, catalog):
    client.force_login(cast.team_admin)
    created = _add(client, JAX)
    assert created.status_code == 201, created.content
    assert created.json()["team"] == "vision" and created.json()["slug"] == "jax-a100"
    client.force_login(cast.researcher)
    slugs = [
        i["slug"]
        for i in _list(client, team="vision", kind="vm", gpu_family="A100").json()["items"]
    ]
    assert "jax-a100" in slugs


def test_adding_says_which_field_is_wrong_and_who_may(client, cast, catalog):
    client.force_login(cast.team_admin)
    wrong = _add(client, {**JAX, "extension_settings": {"A100": {"driverVersion": "latest"}}})
    assert wrong.status_code == 400
    assert wrong.json()["errors"][0]["loc"] == ["body", "driver_method"]
    assert _add(client, {**JAX, "team": ""}).status_code == 403  # the catalog: platform admins
    client.force_login(cast.researcher)
    assert _add(client, JAX).status_code == 403
    client.force_login(cast.outsider)
    assert _add(client, JAX).status_code == 404
    client.force_login(cast.platform_admin)
    assert _add(client, {**JAX, "team": ""}).json()["team"] is None
