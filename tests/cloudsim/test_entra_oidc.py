"""Entra ID's OpenID Connect side: discovery, JWKS, authorize -> token, key rotation."""

import jwt
import pytest

from cloudsim.entra.directory import DEMO_CLIENT_ID, NLP_GROUP, TENANT_ID, VISION_LAB, demo_oid

from .entra_helpers import REDIRECT, Entra, call, pkce


@pytest.fixture
def entra(sim) -> Entra:
    return Entra(sim.url)


def verify(entra: Entra, token: str, audience: str) -> dict:
    """Verify as a relying party would: the kid's key from the JWKS, PyJWT."""
    keys = jwt.PyJWKSet.from_dict(entra.jwks())
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    issuer = f"{entra.root}/v2.0"
    return jwt.decode(token, key.key, algorithms=["RS256"], audience=audience, issuer=issuer)


def test_discovery_names_the_tenants_endpoints(entra):
    status, _, doc = call(f"{entra.root}/v2.0/.well-known/openid-configuration")

    assert status == 200
    assert doc["issuer"] == f"{entra.url}/{TENANT_ID}/v2.0"
    assert doc["authorization_endpoint"] == f"{entra.root}/oauth2/v2.0/authorize"
    assert doc["token_endpoint"] == f"{entra.root}/oauth2/v2.0/token"
    assert doc["jwks_uri"] == f"{entra.root}/discovery/v2.0/keys"
    assert doc["id_token_signing_alg_values_supported"] == ["RS256"]
    assert "code" in doc["response_types_supported"]


def test_unknown_tenant_is_refused(entra):
    status, _, body = call(f"{entra.url}/nope/v2.0/.well-known/openid-configuration")

    assert (status, body["error"], body["error_codes"]) == (400, "invalid_tenant", [90002])


def test_jwks_lists_rs256_signing_keys(entra):
    keys = entra.jwks()["keys"]

    assert len(keys) == 1
    assert {k: keys[0][k] for k in ("kty", "use", "alg")} == {
        "kty": "RSA",
        "use": "sig",
        "alg": "RS256",
    }
    assert keys[0]["kid"] and keys[0]["n"] and keys[0]["e"] == "AQAB"


def test_authorize_page_lists_the_demo_identities(entra):
    query = f"client_id={DEMO_CLIENT_ID}&response_type=code&redirect_uri={REDIRECT}&scope=openid"
    status, headers, page = call(f"{entra.root}/oauth2/v2.0/authorize?{query}")

    assert status == 200 and headers["content-type"].startswith("text/html")
    for name in ("alice", "bob", "victor", "nora", "pat"):
        assert f"{name}@example.org" in page


def test_sign_in_round_trip_gives_a_verified_id_token(entra):
    verifier, challenge = pkce()
    status, query = entra.sign_in("alice@example.org", challenge, nonce="nonce-42")
    assert (status, query["state"]) == (302, "st1")

    status, headers, body = entra.redeem(query["code"], verifier)

    assert status == 200, body
    assert body["token_type"] == "Bearer" and headers["cache-control"] == "no-store"
    claims = verify(entra, body["id_token"], DEMO_CLIENT_ID)
    assert claims["nonce"] == "nonce-42"
    assert claims["oid"] == demo_oid("alice") and claims["tid"] == TENANT_ID
    assert claims["preferred_username"] == "alice@example.org" and claims["ver"] == "2.0"
    assert claims["groups"] == [VISION_LAB] and claims["roles"] == []
    assert claims["nbf"] <= claims["iat"] < claims["exp"] and claims["sub"] and claims["name"]


def test_platform_admin_carries_the_app_role(entra):
    verifier, challenge = pkce()
    code = entra.sign_in("pat@example.org", challenge)[1]["code"]

    claims = verify(entra, entra.redeem(code, verifier)[2]["id_token"], DEMO_CLIENT_ID)

    assert claims["roles"] == ["Platform.Admin"] and claims["groups"] == []


def test_pkce_mismatch_is_invalid_grant(entra):
    _, challenge = pkce()
    code = entra.sign_in("bob@example.org", challenge)[1]["code"]

    status, _, body = entra.redeem(code, "not-the-verifier-" + "x" * 40)

    assert (status, body["error"], body["error_codes"]) == (400, "invalid_grant", [501481])
    assert body["error_description"].startswith("AADSTS501481: The Code_Verifier does not match")
    assert {"timestamp", "trace_id", "correlation_id"} <= body.keys()


def test_a_code_is_redeemed_once(entra):
    verifier, challenge = pkce()
    code = entra.sign_in("bob@example.org", challenge)[1]["code"]

    first, second = entra.redeem(code, verifier), entra.redeem(code, verifier)

    assert first[0] == 200
    assert (second[0], second[2]["error"], second[2]["error_codes"]) == (
        400,
        "invalid_grant",
        [54005],
    )


def test_disabled_user_cannot_sign_in(entra):
    _, query = entra.sign_in("eve@example.org", pkce()[1])

    assert query["error"] == "access_denied" and "AADSTS50057" in query["error_description"]
    assert "code" not in query


def test_a_user_disabled_after_the_code_gets_no_token(entra, ctl):
    verifier, challenge = pkce()
    code = entra.sign_in("alice@example.org", challenge)[1]["code"]
    ctl.entra_disable_user("alice@example.org")

    status, _, body = entra.redeem(code, verifier)

    assert (status, body["error"], body["error_codes"]) == (400, "invalid_grant", [50057])


def test_basic_client_authentication_is_accepted(entra):
    import base64

    basic = base64.b64encode(f"{DEMO_CLIENT_ID}:demo-client-secret".encode()).decode()
    form = {"grant_type": "client_credentials", "scope": "https://graph.microsoft.com/.default"}
    status, _, body = call(f"{entra.root}/oauth2/v2.0/token", "POST", form, basic=basic)

    assert status == 200, body


def test_key_rotation_keeps_the_old_key_listed_until_dropped(entra, ctl):
    old_kid = entra.jwks()["keys"][0]["kid"]

    new_kid = ctl.entra_rotate_keys()["kid"]
    verifier, challenge = pkce()
    code = entra.sign_in("nora@example.org", challenge)[1]["code"]
    token = entra.redeem(code, verifier)[2]["id_token"]

    assert [k["kid"] for k in entra.jwks()["keys"]] == [old_kid, new_kid]
    assert jwt.get_unverified_header(token)["kid"] == new_kid
    assert verify(entra, token, DEMO_CLIENT_ID)["groups"] == [NLP_GROUP]
    ctl.entra_drop_key(old_kid)
    assert [k["kid"] for k in entra.jwks()["keys"]] == [new_kid]


def test_past_the_group_limit_the_token_has_the_overage_claims(entra, ctl):
    groups = [{"display_name": f"g{i}", "members": ["victor"]} for i in range(5)]
    ctl.entra_add(groups=groups)
    ctl.entra_settings(group_limit=5)  # victor is in Vision Lab and these five: six.
    verifier, challenge = pkce()
    code = entra.sign_in("victor@example.org", challenge)[1]["code"]

    claims = verify(entra, entra.redeem(code, verifier)[2]["id_token"], DEMO_CLIENT_ID)

    assert "groups" not in claims
    assert claims["_claim_names"] == {"groups": "src1"}
    endpoint = claims["_claim_sources"]["src1"]["endpoint"]
    assert endpoint == f"{entra.url}/v1.0/users/{demo_oid('victor')}/getMemberObjects"


def test_client_credentials_gives_an_app_token_for_graph(entra):
    claims = jwt.decode(entra.app_token(), options={"verify_signature": False})

    assert claims["aud"] == "https://graph.microsoft.com" and claims["idtyp"] == "app"
    assert claims["appid"] == DEMO_CLIENT_ID and "GroupMember.Read.All" in claims["roles"]


def test_client_credentials_with_a_wrong_secret_is_invalid_client(entra):
    form = {
        "client_id": DEMO_CLIENT_ID,
        "client_secret": "wrong",
        "grant_type": "client_credentials",
        "scope": "https://graph.microsoft.com/.default",
    }
    status, _, body = call(f"{entra.root}/oauth2/v2.0/token", "POST", form)

    assert (status, body["error"], body["error_codes"]) == (401, "invalid_client", [7000215])


def test_token_endpoint_fault_is_injectable(entra, ctl):
    ctl.inject("entra.token", "unavailable", retry_after=4)

    status, headers, body = call(f"{entra.root}/oauth2/v2.0/token", "POST", {})

    assert (status, headers["retry-after"], body["error"]) == (503, "4", "temporarily_unavailable")
