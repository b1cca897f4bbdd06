"""The team's Environments page: what the team is offered, and its admins hiding entries."""

from datetime import UTC, datetime

import pytest

from environments.demo import seed_demo_environments
from environments.selectors import environment_choices

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def catalog(cast):
    return {e.slug: e for e in seed_demo_environments(now=NOW)}


def test_a_member_sees_what_is_offered_and_what_is_inside(client, cast, catalog):
    client.force_login(cast.researcher)
    page = client.get("/teams/vision/environments/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "PyTorch 2.5 + CUDA 12 (Ubuntu-HPC)" in text and "PyTorch 2.5.1" in text
    assert "microsoft-dsvm:ubuntu-hpc:2204:22.04.2024102301" in text
    assert "Hide</button>" not in text  # researchers only read
    assert client.get("/teams/vision/").content.decode().count("/teams/vision/environments/")


def test_a_stranger_gets_404_and_a_researcher_cannot_hide(client, cast, catalog):
    client.force_login(cast.outsider)
    assert client.get("/teams/vision/environments/").status_code == 404
    client.force_login(cast.researcher)
    url = f"/teams/vision/environments/{catalog['cuda-minimal'].pk}/visibility/"
    assert client.post(url, {"hide": "1"}).status_code == 403


def test_a_team_admin_hides_an_entry_and_offers_it_again(client, cast, catalog):
    client.force_login(cast.team_admin)
    minimal = catalog["cuda-minimal"]
    url = f"/teams/vision/environments/{minimal.pk}/visibility/"
    response = client.post(url, {"hide": "1"}, follow=True)
    assert "is hidden from Vision Lab" in response.content.decode()
    assert minimal not in environment_choices(team=cast.team, kind="vm", gpu_family="T4")
    assert "Offer again</button>" in response.content.decode()
    client.post(url, {"hide": "0"})
    assert minimal in environment_choices(team=cast.team, kind="vm", gpu_family="T4")
