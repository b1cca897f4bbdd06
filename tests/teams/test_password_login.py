"""PASSWORD_LOGIN=false: the login page offers only "Sign in with Microsoft", and no password
is checked anywhere (the login page, Django admin's login, authenticate() itself); the portal
refuses to start so switched off without Entra ID sign-in. Entra ID accounts never had a
password to sign in with."""

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.hashers import check_password
from django.urls import reverse

from tests.entra_portal import entra_on_fixture, sign_in  # noqa: F401
from tests.factories import UserFactory
from tests.portal.test_production_settings import PRODUCTION, _run

PASSWORD = "correct horse battery staple"


@pytest.fixture
def passwords_off(entra_on, settings):
    settings.PASSWORD_LOGIN = False
    return entra_on


@pytest.fixture
def local_admin(db):
    """A break-glass platform admin with a local password (superuser: the admin site too)."""
    return UserFactory(username="root", is_staff=True, is_superuser=True, password=PASSWORD)


def _checked_passwords(monkeypatch) -> list:
    """Records every password hash check (none may happen while passwords are off)."""
    seen = []
    monkeypatch.setattr(
        "django.contrib.auth.base_user.check_password",
        lambda raw, encoded, setter=None: seen.append(raw) or check_password(raw, encoded, setter),
    )
    return seen


def test_the_login_page_offers_only_microsoft(client, passwords_off):
    page = client.get(reverse("login")).content.decode()

    assert "Sign in with Microsoft" in page
    assert 'name="password"' not in page and "local account" not in page


def test_a_posted_password_is_refused_without_checking_it(
    client, passwords_off, local_admin, monkeypatch
):
    seen = _checked_passwords(monkeypatch)

    response = client.post(reverse("login"), {"username": "root", "password": PASSWORD})

    assert response.status_code == 403
    assert "sign in with Microsoft" in response.content.decode()
    assert "_auth_user_id" not in client.session and seen == []


def test_the_admin_login_refuses_passwords_and_sends_to_the_portal_login(
    client, passwords_off, local_admin, monkeypatch
):
    seen = _checked_passwords(monkeypatch)

    page = client.get("/admin/login/?next=/admin/")
    posted = client.post("/admin/login/", {"username": "root", "password": PASSWORD})

    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))
    assert posted.status_code == 403
    assert "_auth_user_id" not in client.session and seen == []


def test_authenticate_itself_refuses_any_password(passwords_off, local_admin, rf):
    assert authenticate(rf.post("/"), username="root", password=PASSWORD) is None


def test_microsoft_sign_in_still_works(client, passwords_off):
    response = sign_in(client, "alice@example.org")

    assert response.status_code == 302 and "_auth_user_id" in client.session


def test_break_glass_with_password_login_on(client, entra_on, local_admin, settings):
    settings.PASSWORD_LOGIN = True

    portal = client.post(reverse("login"), {"username": "root", "password": PASSWORD})
    client.logout()
    admin_site = client.post("/admin/login/", {"username": "root", "password": PASSWORD})

    assert portal.status_code == 302 and admin_site.status_code == 302
    assert "_auth_user_id" in client.session


def test_an_entra_account_has_no_password_to_sign_in_with(client, entra_on):
    sign_in(client, "alice@example.org")
    client.logout()
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.get(username="alice@example.org")

    assert not alice.has_usable_password()
    for password in ("", "!", alice.password):
        response = client.post(reverse("login"), {"username": alice.username, "password": password})
        assert response.status_code == 200 and "_auth_user_id" not in client.session


def test_off_without_entra_sign_in_the_portal_refuses_to_start(tmp_path):
    env = {**PRODUCTION, "DEBUG": "0", "SECRET_KEY": "k" * 10 + "x1y2z3" * 10}
    refused = _run(["manage.py", "check"], env | {"PASSWORD_LOGIN": "false"}, tmp_path)
    entra = {
        "ENTRA_TENANT_ID": "11111111-1111-1111-1111-111111111111",
        "ENTRA_CLIENT_ID": "33333333-3333-3333-3333-333333333333",
        "ENTRA_CLIENT_SECRET": "a-real-secret",
    }
    started = _run(["manage.py", "check"], env | {"PASSWORD_LOGIN": "false"} | entra, tmp_path)

    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: PASSWORD_LOGIN"), last
    assert "ENTRA_TENANT_ID" in last and "ENTRA_CLIENT_ID" in last
    assert started.returncode == 0, started.stderr[-2000:]
