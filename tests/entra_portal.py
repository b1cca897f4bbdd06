"""Drive the portal's Entra ID sign-in against the emulator: the portal's own pages through
Django's test client, Entra ID's pages through requests (the browser's part), no redirect
followed by itself. Fixtures: `entra_on` (sign-in on, pointed at the emulator, the demo teams
linked to their groups, Team.entra_group_id)."""

import time
import urllib.parse

import jwt
import pytest
import requests
from django.urls import reverse
from django.utils import timezone

from cloudsim.entra.directory import (
    DEMO_CLIENT_ID,
    DEMO_CLIENT_SECRET,
    NLP_GROUP,
    TENANT_ID,
    VISION_LAB,
)
from clusters.models import AksCluster, ClusterTeam
from teams import entra_oidc
from tests.factories import TeamFactory

CALLBACK = "http://testserver/accounts/entra/callback/"


@pytest.fixture(name="entra_on")
def entra_on_fixture(sim, sim_server, settings, db):
    """Entra ID sign-in on against the emulator; Vision Lab and NLP Group linked to the
    emulator's demo groups (Team.entra_group_id) and given a cluster. Returns the teams."""
    settings.ENTRA_TENANT_ID = TENANT_ID
    settings.ENTRA_CLIENT_ID = DEMO_CLIENT_ID
    settings.ENTRA_CLIENT_SECRET = DEMO_CLIENT_SECRET
    settings.ENTRA_AUTHORITY = sim_server.url
    settings.ENTRA_GRAPH_ENDPOINT = sim_server.url
    entra_oidc.forget_cached()
    cluster = AksCluster.objects.create(
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        name="aks",
        location="eastus",
        registered_at=timezone.now(),
    )
    teams = {}
    for name, slug, group in (
        ("Vision Lab", "vision", VISION_LAB),
        ("NLP Group", "nlp", NLP_GROUP),
    ):
        teams[slug] = team = TeamFactory(
            name=name, slug=slug, entra_group_id=group, entra_group_name=name
        )
        ClusterTeam.objects.create(cluster=cluster, team=team, namespace=f"team-{slug}")
    yield teams
    entra_oidc.forget_cached()


def begin(client) -> str:
    """The portal's redirect to Entra ID's authorize endpoint."""
    response = client.get(reverse("entra-login"))
    assert response.status_code == 302, response.content[:300]
    return response["Location"]


def pick(authorize_url: str, who: str) -> str:
    """What the browser does on Entra ID's page: GET it, pick `who`; the callback's query."""
    page = requests.get(authorize_url, timeout=10)
    assert page.status_code == 200 and who in page.text
    base, _, query = authorize_url.partition("?")
    form = dict(urllib.parse.parse_qsl(query)) | {"login_hint": who}
    answer = requests.post(base, data=form, allow_redirects=False, timeout=10)
    assert answer.headers["Location"].startswith(CALLBACK), answer.headers["Location"]
    return urllib.parse.urlsplit(answer.headers["Location"]).query


def finish(client, query: str):
    return client.get(f"{reverse('entra-callback')}?{query}")


def sign_in(client, who: str):
    """The whole round trip for `who` (a UPN); the callback's response."""
    return finish(client, pick(begin(client), who))


def mint(sim_server, claims: dict, key=None, kid=None) -> str:
    """An ID token of the emulator's shape, signed (PyJWT) by its active key unless `key`."""
    ring = sim_server.state.entra.keys
    now = int(time.time())
    body = {
        "aud": DEMO_CLIENT_ID,
        "iss": f"{sim_server.url}/{TENANT_ID}/v2.0",
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "oid": "0b5c1d9e-7f1a-4b6c-9d2e-3f4a5b6c7d8e",
        "tid": TENANT_ID,
        "preferred_username": "mallory@example.org",
        "name": "Mallory",
        "groups": [VISION_LAB],
        "roles": [],
        "ver": "2.0",
    } | claims
    headers = {"kid": kid or ring.active, "typ": "JWT"}
    return jwt.encode(body, key or ring.keys[ring.active], algorithm="RS256", headers=headers)
