"""The client credentials grant for an app's own API (api://{client id}/.default): how a
pipeline's service principal or managed identity gets a token for the portal's API."""

import jwt
import pytest

from cloudsim.entra.directory import DEMO_CLIENT_ID, TENANT_ID

from .entra_helpers import Entra, call


@pytest.fixture
def entra(sim) -> Entra:
    return Entra(sim.url)


def _grant(entra: Entra, app: dict, scope: str):
    form = {
        "client_id": app["client_id"],
        "client_secret": app["client_secret"],
        "grant_type": "client_credentials",
        "scope": scope,
    }
    return call(f"{entra.root}/oauth2/v2.0/token", "POST", form)


@pytest.mark.parametrize(
    "scope", [f"api://{DEMO_CLIENT_ID}/.default", f"{DEMO_CLIENT_ID}/.default"]
)
def test_app_token_for_the_portals_api_has_entras_v2_shape(entra, ctl, scope):
    app = ctl.entra_add_app("nightly-pipeline", roles=["Workspaces.ReadWrite"])

    status, headers, body = _grant(entra, app, scope)

    assert status == 200, body
    assert headers["cache-control"] == "no-store"
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    keys = jwt.PyJWKSet.from_dict(entra.jwks())
    kid = jwt.get_unverified_header(body["access_token"])["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    claims = jwt.decode(
        body["access_token"],
        key.key,
        algorithms=["RS256"],
        audience=DEMO_CLIENT_ID,
        issuer=f"{entra.root}/v2.0",
    )
    assert claims["oid"] == claims["sub"] == app["object_id"]
    assert claims["azp"] == app["client_id"] and claims["idtyp"] == "app"
    assert claims["tid"] == TENANT_ID and claims["ver"] == "2.0"
    assert claims["roles"] == ["Workspaces.ReadWrite"]
    assert claims["exp"] - claims["iat"] == 3600


def test_app_without_roles_gets_no_roles_claim(entra, ctl):
    app = ctl.entra_add_app("reader")

    body = _grant(entra, app, f"api://{DEMO_CLIENT_ID}/.default")[2]

    assert "roles" not in jwt.decode(body["access_token"], options={"verify_signature": False})


def test_unknown_resource_is_aadsts500011(entra, ctl):
    app = ctl.entra_add_app("lost")

    status, _, body = _grant(entra, app, "api://33333333-3333-3333-3333-333333333333/.default")

    assert (status, body["error"], body["error_codes"]) == (400, "invalid_resource", [500011])


def test_scope_without_default_is_aadsts1002012(entra, ctl):
    app = ctl.entra_add_app("lost")

    status, _, body = _grant(entra, app, f"api://{DEMO_CLIENT_ID}/Workspaces.ReadWrite")

    assert (status, body["error_codes"]) == (400, [1002012])


def test_apps_are_listed_and_a_taken_client_id_conflicts(ctl):
    app = ctl.entra_add_app("ci", roles=["Workspaces.ReadWrite"], client_id="ci-client")

    listed = {a["client_id"]: a for a in ctl.entra()["apps"]}

    assert listed["ci-client"]["object_id"] == app["object_id"]
    assert listed["ci-client"]["roles"] == ["Workspaces.ReadWrite"]
    with pytest.raises(Exception, match="409|exists"):
        ctl.entra_add_app("again", client_id="ci-client")
