"""Personal access tokens: created and shown once, stored as a hash, refused when expired,
revoked or unknown, scoped, rate-limited per token, audited; and the /account/tokens/ page."""

import hashlib
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.cache import cache
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from teams.models import ApiToken, AuditEntry
from teams.tokens import TokenError, api_token_authenticate, api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db
TOKEN_RE = re.compile(r"gpp_[A-Za-z0-9_-]{43}")


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()  # Rate counters of an earlier test are not this one's.
    yield


def _token(user, scope="write", days=30, now=None, name="laptop"):
    now = now or timezone.now()
    return api_token_create(user=user, name=name, scope=scope, expires_in_days=days, now=now)


def _me(client, text):
    return client.get("/api/v1/me", headers={"Authorization": f"Bearer {text}"})


def test_created_token_has_the_documented_shape_and_only_its_hash_is_stored(cast):
    token, text = _token(cast.researcher)

    assert TOKEN_RE.fullmatch(text)
    token.refresh_from_db()
    assert token.token_hash == hashlib.sha256(text.encode()).hexdigest()
    assert token.prefix == text[4:12]
    # No column of any row holds the token text (nor its secret part).
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM teams_apitoken")
        rows = cursor.fetchall()
    assert rows and not any(text[4:] in str(value) for row in rows for value in row)


def test_token_is_a_caller_with_its_scope(client, cast):
    _, text = _token(cast.researcher, scope="read")

    response = _me(client, text)

    assert response.status_code == 200
    assert response.json() == {"username": "alice", "display_name": "alice", "scope": "read"}


@pytest.mark.parametrize(
    "header",
    [
        "Bearer gpp_" + "A" * 43,  # well-formed, unknown
        "Bearer gpp_short",
        "Bearer gpp_" + "\u00e9" * 43,
        "Bearer " + "gpp_" + "A" * 10_000,
    ],
)
def test_unknown_token_is_401_problem(client, cast, header):
    response = client.get("/api/v1/me", headers={"Authorization": header})

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"] == "The token is unknown, expired or revoked."


def test_expired_token_is_401(client, cast):
    created = timezone.now() - timedelta(days=2)
    _, text = _token(cast.researcher, days=1, now=created)

    response = _me(client, text)

    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


def test_revoked_token_is_401(client, cast):
    token, text = _token(cast.researcher)
    assert _me(client, text).status_code == 200

    api_token_revoke(user=cast.researcher, token_id=token.pk, now=timezone.now())

    assert _me(client, text).status_code == 401


def test_token_of_a_deactivated_user_is_401(client, cast):
    _, text = _token(cast.researcher)
    cast.researcher.is_active = False
    cast.researcher.save()

    assert _me(client, text).status_code == 401


def test_refused_token_does_not_fall_back_to_the_session(client, cast):
    client.force_login(cast.researcher)

    assert _me(client, "gpp_" + "B" * 43).status_code == 401


def test_read_token_may_not_write(rf, cast):
    from ninja.errors import HttpError

    from api.auth import PersonalToken, require_write

    _, read = _token(cast.researcher, scope="read")
    _, write = _token(cast.researcher, scope="write", name="ci")
    request = rf.post("/api/v1/workspaces", headers={"Authorization": f"Bearer {read}"})
    assert PersonalToken()(request) == cast.researcher
    with pytest.raises(HttpError) as refused:
        require_write(request)
    assert refused.value.status_code == 403

    request = rf.post("/api/v1/workspaces", headers={"Authorization": f"Bearer {write}"})
    assert PersonalToken()(request) == cast.researcher
    require_write(request)  # No error.


def test_last_used_is_recorded_at_most_once_a_minute(client, cast):
    start = timezone.now().replace(microsecond=0)
    token, text = _token(cast.researcher, now=start)
    assert token.last_used_at is None

    with time_machine.travel(start + timedelta(seconds=5), tick=False):
        assert _me(client, text).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == start + timedelta(seconds=5)

    with time_machine.travel(start + timedelta(seconds=50), tick=False):
        assert _me(client, text).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == start + timedelta(seconds=5)

    with time_machine.travel(start + timedelta(seconds=70), tick=False):
        assert _me(client, text).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == start + timedelta(seconds=70)


def test_rate_limit_per_token_answers_429_with_retry_after(client, cast, settings):
    settings.API_RATE_PER_MINUTE = 3
    _, text = _token(cast.researcher)
    _, other = _token(cast.researcher, name="other")
    minute = timezone.now().replace(second=10, microsecond=0) + timedelta(minutes=1)

    with time_machine.travel(minute, tick=False):
        answers = [_me(client, text).status_code for _ in range(3)]
        refused = _me(client, text)
        other_token = _me(client, other)

    assert answers == [200, 200, 200]
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/problem+json"
    assert refused["Retry-After"] == "50"
    assert other_token.status_code == 200  # Per token, not per user.
    with time_machine.travel(minute + timedelta(seconds=51), tick=False):
        assert _me(client, text).status_code == 200  # A new minute.


def test_create_and_revoke_are_audited_without_the_token(cast):
    now = timezone.now()
    token, text = _token(cast.researcher, scope="read", now=now)
    api_token_revoke(user=cast.researcher, token_id=token.pk, now=now)
    api_token_revoke(user=cast.researcher, token_id=token.pk, now=now)  # Already: no row.

    entries = list(AuditEntry.objects.filter(object_type="teams.ApiToken").order_by("id"))

    assert [e.action for e in entries] == ["api_token.create", "api_token.revoke"]
    assert all(e.actor == cast.researcher for e in entries)
    assert entries[0].after["name"] == "laptop" and entries[0].after["scope"] == "read"
    assert entries[1].after["revoked_at"]
    assert not any(text[4:] in str(e.before) + str(e.after) for e in entries)


def test_another_users_token_cannot_be_revoked(cast):
    token, text = _token(cast.researcher)

    with pytest.raises(ApiToken.DoesNotExist):
        api_token_revoke(user=cast.outsider, token_id=token.pk, now=timezone.now())

    assert api_token_authenticate(token=text, now=timezone.now()) is not None


@pytest.mark.parametrize(
    ("name", "scope", "days"),
    [
        ("", "read", 30),
        ("   ", "read", 30),
        ("x" * 65, "read", 30),
        ("bad\x00name", "read", 30),
        ("bad\x1b[31mname", "read", 30),
        ("evil\u202etxt", "read", 30),
        ("ok", "admin", 30),
        ("ok", "read", 0),
        ("ok", "read", 366),
        ("ok", "read", True),
        ("ok", "read", "30"),
    ],
)
def test_hostile_input_is_refused_and_nothing_is_made(cast, name, scope, days):
    with pytest.raises(TokenError):
        _token(cast.researcher, name=name, scope=scope, days=days)

    assert not ApiToken.objects.exists() and not AuditEntry.objects.exists()


def test_live_tokens_per_user_are_capped(cast, monkeypatch):
    from teams import tokens

    monkeypatch.setattr(tokens, "ACTIVE_MAX", 2)
    _token(cast.researcher, name="a")
    _token(cast.researcher, name="b")

    with pytest.raises(TokenError, match="revoke one"):
        _token(cast.researcher, name="c")
    _token(cast.outsider, name="c")  # Per user.


# --- the page: /account/tokens/ --------------------------------------------------------------


def _create_on_page(client, **data):
    form = {"name": "laptop", "scope": "write", "expires_in_days": "30"} | data
    return client.post(reverse("account-tokens"), form)


def test_page_creates_a_token_and_shows_it_once(client, cast):
    client.force_login(cast.researcher)

    response = _create_on_page(client)

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    text = TOKEN_RE.search(page).group(0)
    assert "shown only this once" in page and "Never" in page  # Listed, not used yet.
    assert _me(client, text).json()["scope"] == "write"
    again = client.get(reverse("account-tokens")).content.decode()
    assert text not in again and text[4:12] in again  # Listed by its prefix only.
    assert "laptop" in again and "Read and write" in again


def test_page_lists_times_in_the_users_time_zone(client, cast):
    created = datetime(2026, 11, 24, 17, 0, tzinfo=UTC)
    _token(cast.researcher, now=created)
    client.force_login(cast.researcher)
    client.cookies["tz"] = "Europe/Berlin"

    page = client.get(reverse("account-tokens")).content.decode()

    assert "24 Nov 2026 18:00" in page  # 17:00 UTC in Berlin.
    assert "24 Dec 2026 18:00" in page  # Expires 30 days later.


def test_page_revokes_a_token(client, cast):
    token, text = _token(cast.researcher)
    client.force_login(cast.researcher)

    response = client.post(reverse("account-token-revoke", kwargs={"pk": token.pk}))

    assert response.status_code == 302
    assert _me(client, text).status_code == 401
    assert f"token-{token.pk}" not in client.get(reverse("account-tokens")).content.decode()


def test_page_another_users_token_is_404(client, cast):
    token, text = _token(cast.researcher)
    client.force_login(cast.outsider)

    response = client.post(reverse("account-token-revoke", kwargs={"pk": token.pk}))

    assert response.status_code == 404
    assert f"token-{token.pk}" not in client.get(reverse("account-tokens")).content.decode()
    assert api_token_authenticate(token=text, now=timezone.now()) is not None


@pytest.mark.parametrize(
    "data",
    [
        {"name": ""},
        {"name": "x" * 65},
        {"name": "bad\x00name"},
        {"name": "bad\x1b[2Jname"},
        {"name": "rtl\u202eexe"},
        {"scope": "admin"},
        {"expires_in_days": "0"},
        {"expires_in_days": "366"},
        {"expires_in_days": "1e9"},
        {"expires_in_days": "9" * 400},
    ],
)
def test_page_refuses_hostile_input_with_a_form_error(client, cast, data):
    client.force_login(cast.researcher)

    response = _create_on_page(client, **data)

    assert response.status_code == 400
    assert 'class="invalid-feedback' in response.content.decode()
    assert not ApiToken.objects.exists()


def test_navbar_links_to_the_tokens_page(client, cast):
    client.force_login(cast.researcher)

    page = client.get(reverse("account")).content.decode()

    assert f'href="{reverse("account-tokens")}"' in page


def test_the_count_is_shared_between_worker_processes(client, cast, settings, tmp_path):
    # The embedded default's file cache; another process (a second gunicorn worker) spends
    # the token's minute, and this one refuses the next request.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path),
        }
    }
    settings.API_RATE_PER_MINUTE = 2
    token, text = _token(cast.researcher)
    now = timezone.now().replace(second=5, microsecond=0) + timedelta(minutes=1)
    script = (
        "import django; django.setup()\n"
        "from api.ratelimit import rate_limit_check\n"
        f"key, now = 'pat:{token.token_hash[:32]}', {now.timestamp()}\n"
        "for _ in range(2): rate_limit_check(key=key, now=now)\n"
    )
    env = os.environ | {"CACHE_URL": f"filecache://{tmp_path}", "API_RATE_PER_MINUTE": "2"}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)

    with time_machine.travel(now + timedelta(seconds=1), tick=False):
        response = _me(client, text)

    assert response.status_code == 429
    assert response["Retry-After"] == "54"
