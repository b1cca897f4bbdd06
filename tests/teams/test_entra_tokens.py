"""ID tokens the portal refuses, each with its own test: the user sees why on the login page
(400) and is not signed in. The tokens are minted here with PyJWT, signed with the emulator's
key (or one it does not serve), and handed to the callback in place of the token endpoint's."""

import time

import pytest
import time_machine
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model

from cloudsim.entra.directory import TENANT_ID
from teams import entra_oidc
from tests.entra_portal import begin, entra_on_fixture, finish, mint, pick  # noqa: F401

OTHER_TENANT = "99999999-9999-9999-9999-999999999999"


@pytest.fixture
def started(client, entra_on):
    """A flow begun by `client`: (the callback's query from Entra ID, the session's nonce)."""
    query = pick(begin(client), "alice@example.org")
    return query, client.session["entra_flow"]["nonce"]


@pytest.fixture
def jwks_fetches(monkeypatch):
    calls = []
    real = entra_oidc._fetch_jwks
    monkeypatch.setattr(entra_oidc, "_fetch_jwks", lambda uri: calls.append(uri) or real(uri))
    return calls


def _callback_with(client, monkeypatch, query: str, token: str):
    monkeypatch.setattr(entra_oidc, "code_redeem", lambda **kw: token)
    return finish(client, query)


def _refused(client, response, reason: str):
    assert response.status_code == 400
    assert reason in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(profile__signin_object_id__isnull=False).exists()


def test_a_minted_token_is_accepted(client, monkeypatch, sim_server, started):
    # The control for the tests below: only the one claim each changes is wrong there.
    query, nonce = started
    response = _callback_with(client, monkeypatch, query, mint(sim_server, {"nonce": nonce}))

    assert response.status_code == 302 and "_auth_user_id" in client.session


def test_wrong_audience(client, monkeypatch, sim_server, started):
    query, nonce = started
    token = mint(sim_server, {"nonce": nonce, "aud": "33333333-3333-3333-3333-333333333333"})

    response = _callback_with(client, monkeypatch, query, token)

    _refused(client, response, "The sign-in token is for another application.")


def test_another_tenants_issuer(client, monkeypatch, sim_server, started):
    query, nonce = started
    iss = f"{sim_server.url}/{OTHER_TENANT}/v2.0"
    token = mint(sim_server, {"nonce": nonce, "iss": iss, "tid": OTHER_TENANT})

    response = _callback_with(client, monkeypatch, query, token)

    _refused(client, response, "The sign-in token was issued by another tenant.")


def test_another_tenant_id_under_our_issuer(client, monkeypatch, sim_server, started):
    query, nonce = started
    token = mint(sim_server, {"nonce": nonce, "tid": OTHER_TENANT})

    response = _callback_with(client, monkeypatch, query, token)

    _refused(client, response, "The sign-in token is for another tenant.")


def test_expired(client, monkeypatch, sim_server, started, settings):
    query, nonce = started
    token = mint(sim_server, {"nonce": nonce})  # Valid for an hour from now.

    later = time.time() + 3600 + settings.ENTRA_LEEWAY_SECONDS + 5
    with time_machine.travel(later, tick=False):
        response = _callback_with(client, monkeypatch, query, token)

    _refused(client, response, "The sign-in token has expired; sign in again.")


def test_within_the_leeway_an_expired_token_still_passes(sim_server, entra_on, settings):
    token = mint(sim_server, {"nonce": "n1"})

    with time_machine.travel(time.time() + 3600 + settings.ENTRA_LEEWAY_SECONDS - 30):
        claims = entra_oidc.id_token_claims(token, nonce="n1")

    assert claims["tid"] == TENANT_ID


def test_bad_signature(client, monkeypatch, sim_server, started):
    query, nonce = started
    foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = mint(sim_server, {"nonce": nonce}, key=foreign)  # The emulator's kid, not its key.

    response = _callback_with(client, monkeypatch, query, token)

    _refused(client, response, "The sign-in token&#x27;s signature is not valid.")


def test_unknown_kid_refetches_the_jwks_once_then_refuses(
    client, monkeypatch, sim_server, started, jwks_fetches
):
    query, nonce = started
    entra_oidc.signing_key(sim_server.state.entra.keys.active)  # The keys are cached now.
    jwks_fetches.clear()
    foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = mint(sim_server, {"nonce": nonce}, key=foreign, kid="not-a-listed-kid")

    response = _callback_with(client, monkeypatch, query, token)

    _refused(client, response, "signed with a key Entra ID does not list")
    assert len(jwks_fetches) == 1


def test_a_rotated_key_is_fetched_once_and_accepted(client, entra_on, sim, jwks_fetches):
    entra_oidc.signing_key(sim.entra()["kids"][0])  # Cached before the rotation.
    jwks_fetches.clear()
    sim.entra_rotate_keys()

    response = finish(client, pick(begin(client), "alice@example.org"))

    assert response.status_code == 302 and "_auth_user_id" in client.session
    assert len(jwks_fetches) == 1


def test_replayed_nonce(client, entra_on):
    # Two codes for one flow (same state and nonce): the first signs in; replaying the flow
    # (a copied session) with the second gets a real token whose nonce was already used.
    authorize = begin(client)
    flow = dict(client.session["entra_flow"])
    first, second = pick(authorize, "alice@example.org"), pick(authorize, "alice@example.org")
    assert finish(client, first).status_code == 302
    client.logout()
    session = client.session
    session["entra_flow"] = flow
    session.save()

    response = finish(client, second)

    assert response.status_code == 400
    assert "This sign-in was already used; sign in again." in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_replaying_the_callback_url(client, entra_on):
    query = pick(begin(client), "alice@example.org")
    assert finish(client, query).status_code == 302
    client.logout()

    response = finish(client, query)

    assert response.status_code == 400 and "_auth_user_id" not in client.session


def test_tampered_state(client, entra_on, jwks_fetches):
    query = pick(begin(client), "alice@example.org")
    tampered = query.replace("state=", "state=x")

    response = finish(client, tampered)

    assert response.status_code == 400
    assert "could not be matched to this browser" in response.content.decode()
    assert "_auth_user_id" not in client.session and jwks_fetches == []


def test_no_token_or_secret_in_the_log(client, entra_on, sim_server, caplog, monkeypatch):
    query = pick(begin(client), "alice@example.org")
    token = mint(sim_server, {"nonce": "not-this-flows"})

    _callback_with(client, monkeypatch, query, token)

    assert "Entra ID sign-in refused" in caplog.text
    assert token not in caplog.text and "demo-client-secret" not in caplog.text
