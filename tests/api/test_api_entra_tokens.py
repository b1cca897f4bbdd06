"""Entra ID access tokens for the portal's API: a managed identity's token from the emulator's
client credentials grant (api://{client id}/.default) is a caller with the scope of its app
role; tokens for another audience, expired, from another tenant, or for an identity that is
no portal user are 401 problems."""

import time
import uuid

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from cloudsim.entra.directory import DEMO_CLIENT_ID, TENANT_ID
from teams import entra_oidc
from teams.entra_sync import entra_sync
from teams.memberships import membership_invite
from teams.models import AuditEntry, Membership, Profile
from tests.entra_portal import entra_on_fixture, mint  # noqa: F401

pytestmark = pytest.mark.django_db
API_SCOPE = f"api://{DEMO_CLIENT_ID}/.default"
OTHER_TENANT = "99999999-9999-9999-9999-999999999999"


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()  # Rate counters and the JWKS refetch guard of earlier tests.
    yield


def _grant(sim_server, app: dict, scope: str = API_SCOPE) -> str:
    """What a pipeline does: the client credentials grant at the tenant's v2.0 token endpoint."""
    answer = requests.post(
        f"{sim_server.url}/{TENANT_ID}/oauth2/v2.0/token",
        data={
            "client_id": app["client_id"],
            "client_secret": app["client_secret"],
            "grant_type": "client_credentials",
            "scope": scope,
        },
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]


def _me(client, token: str):
    return client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def pipeline(sim, entra_on):
    """A managed identity holding Workspaces.ReadWrite, mapped to the service account ci."""
    app = sim.entra_add_app("nightly-pipeline", roles=["Workspaces.ReadWrite"])
    call_command("api_service_account", "ci", "--object-id", app["object_id"])
    return app


def _claims(**changes) -> dict:
    """An app-only token's claims for the service account ``ci`` (see ``pipeline``)."""
    oid = str(Profile.objects.get(user__username="ci").signin_object_id)
    return {"oid": oid, "sub": oid, "idtyp": "app", "azp": "x", "roles": []} | changes


def test_managed_identity_token_is_a_caller_with_write_scope(client, sim_server, pipeline):
    response = _me(client, _grant(sim_server, pipeline))

    assert response.status_code == 200, response.content
    assert response.json() == {"username": "ci", "display_name": "ci", "scope": "write"}


def test_identity_without_the_role_reads_only(client, sim, sim_server, entra_on):
    app = sim.entra_add_app("dashboard")
    call_command("api_service_account", "dashboard", "--object-id", app["object_id"])

    response = _me(client, _grant(sim_server, app))

    assert response.status_code == 200 and response.json()["scope"] == "read"


def test_app_id_uri_audience_is_accepted_too(client, sim_server, pipeline):
    token = mint(sim_server, _claims(aud=f"api://{DEMO_CLIENT_ID}", roles=["Workspaces.ReadWrite"]))

    assert _me(client, token).json()["scope"] == "write"


def test_delegated_token_with_the_scope_writes(client, sim_server, pipeline):
    token = mint(sim_server, _claims(idtyp="user", scp="User.Read Workspaces.ReadWrite"))

    assert _me(client, token).json()["scope"] == "write"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"aud": "https://graph.microsoft.com"}, "The token is for another application."),
        ({"aud": "33333333-3333-3333-3333-333333333333"}, "The token is for another application."),
        ({"exp": int(time.time()) - 600}, "The token has expired."),
        ({"nbf": int(time.time()) + 3600}, "The token is not valid yet; check the server's clock."),
        ({"tid": OTHER_TENANT}, "The token is for another tenant."),
        ({"oid": str(uuid.uuid4())}, "The token's identity is not a user of the portal."),
        ({"oid": "not-a-uuid"}, "The token names no valid identity."),
    ],
)
def test_refused_tokens_are_401_problems(client, sim_server, pipeline, changes, reason):
    response = _me(client, mint(sim_server, _claims(**changes)))

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"] == reason


def test_app_only_token_without_the_optional_idtyp_claim_is_taken(client, sim_server, pipeline):
    claims = {k: v for k, v in _claims(roles=["Workspaces.ReadWrite"]).items() if k != "idtyp"}

    assert _me(client, mint(sim_server, claims)).json()["scope"] == "write"


@pytest.mark.parametrize(
    "changes",
    [
        # An ID token from a user's sign-in (aud: the client id), holding the write app role.
        {"idtyp": None, "azp": None, "nonce": "n-123", "roles": ["Workspaces.ReadWrite"]},
        {"idtyp": None, "azp": None, "roles": ["Workspaces.ReadWrite"]},  # no nonce asked for
        {"idtyp": "app", "nonce": "n-123", "roles": ["Workspaces.ReadWrite"]},
        {"idtyp": "user", "scp": "Workspaces.ReadWrite", "nonce": "n-123"},
        {"idtyp": "app", "scp": "Workspaces.ReadWrite"},  # neither one nor the other
        {"idtyp": "user", "roles": ["Workspaces.ReadWrite"]},  # user, no delegated scope
    ],
)
def test_id_tokens_are_not_access_tokens(client, sim_server, pipeline, changes):
    claims = {k: v for k, v in _claims(**changes).items() if v is not None}

    response = _me(client, mint(sim_server, claims))

    assert response.status_code == 401
    assert (
        response.json()["detail"] == "Send an access token for the portal's API, not an ID token."
    )


def test_another_tenants_issuer_is_401(client, sim_server, pipeline):
    issuer = f"{sim_server.url}/{OTHER_TENANT}/v2.0"

    response = _me(client, mint(sim_server, _claims(iss=issuer, tid=OTHER_TENANT)))

    assert response.status_code == 401
    assert response.json()["detail"] == "The token was issued by another tenant."


def test_token_signed_by_a_key_entra_does_not_list_is_401(client, sim_server, pipeline):
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    response = _me(client, mint(sim_server, _claims(), key=key))

    assert response.status_code == 401


def test_made_up_key_ids_refetch_the_keys_at_most_once_a_minute(
    client, sim_server, pipeline, monkeypatch
):
    fetches = []
    real = entra_oidc._fetch_jwks
    monkeypatch.setattr(entra_oidc, "_fetch_jwks", lambda uri: fetches.append(uri) or real(uri))
    assert _me(client, _grant(sim_server, pipeline)).status_code == 200  # Keys cached.
    fetches.clear()

    answers = [_me(client, mint(sim_server, _claims(), kid=f"k{i}")).status_code for i in range(5)]

    assert answers == [401] * 5
    assert len(fetches) == 1


def test_jwt_is_refused_when_entra_is_off(client, sim_server, pipeline, settings):
    token = _grant(sim_server, pipeline)
    settings.ENTRA_TENANT_ID = ""

    assert _me(client, token).status_code == 401


def test_deactivated_service_account_is_401(client, sim_server, pipeline):
    get_user_model().objects.filter(username="ci").update(is_active=False)

    assert _me(client, _grant(sim_server, pipeline)).status_code == 401


def test_entra_tokens_are_rate_limited_per_identity(client, sim_server, pipeline, settings):
    settings.API_RATE_PER_MINUTE = 2
    token = _grant(sim_server, pipeline)

    answers = [_me(client, token) for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 429]
    assert int(answers[-1]["Retry-After"]) >= 1


def test_service_account_survives_the_graph_sync_and_joins_linked_teams(
    client, sim_server, pipeline, entra_on
):
    vision = entra_on["vision"]
    admin = get_user_model().objects.create_user(username="victor")  # A local team admin.
    Membership.objects.create(team=vision, user=admin, role="team_admin")

    membership_invite(
        actor=admin, team=vision, identifier="ci", role="researcher", now=timezone.now()
    )
    result = entra_sync(now=timezone.now())

    assert not result.aborted
    assert get_user_model().objects.get(username="ci").is_active
    assert Membership.objects.filter(team=vision, user__username="ci").exists()
    assert _me(client, _grant(sim_server, pipeline)).status_code == 200


def test_service_account_command_refuses_taken_names_and_ids(pipeline):
    oid = str(Profile.objects.get(user__username="ci").signin_object_id)

    with pytest.raises(CommandError, match="taken"):
        call_command("api_service_account", "ci", "--object-id", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="already"):
        call_command("api_service_account", "ci2", "--object-id", oid)
    with pytest.raises(CommandError, match="UUID"):
        call_command("api_service_account", "ci3", "--object-id", "nope")
    with pytest.raises(CommandError):
        call_command("api_service_account", "bad name\x00", "--object-id", str(uuid.uuid4()))
    entries = AuditEntry.objects.filter(action="api.service_account.create")
    assert [e.after["user"] for e in entries] == ["ci"]
