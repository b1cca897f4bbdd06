"""Login throttling (django-axes): five wrong passwords for one account, or twenty from one
address, pause logins for 15 minutes; a lockout and a platform admin's unlock are audited.

Logins are real POSTs to the login page (axes needs the request); the documented defaults
apply: AXES_FAILURE_LIMIT 5, LOGIN_IP_FAILURE_LIMIT 20, AXES_COOLOFF_MINUTES 15."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from axes.models import AccessAttempt
from django.test import RequestFactory
from django.urls import reverse

from common.permissions import ActionNotAllowed
from portal.login_throttle import client_ip
from teams.accounts import login_lockout_reset
from teams.models import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-1"  # tests/factories.py
HOME = "10.1.1.1"
ELSEWHERE = "203.0.113.9"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _documented_limits(settings):
    settings.AXES_FAILURE_LIMIT = 5
    settings.LOGIN_IP_FAILURE_LIMIT = 20
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    settings.TRUSTED_PROXY_COUNT = 0


@pytest.fixture
def clock():
    with time_machine.travel(START, tick=False) as traveller:
        yield traveller


def _log_in(client, username, password=PASSWORD, ip=HOME, **headers):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip, **headers
    )


def _logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.client.session


def _fail(client, username, times, ip=HOME):
    return [_log_in(client, username, "wrong-password", ip).status_code for _ in range(times)]


def test_the_right_password_is_refused_after_five_wrong_ones(client, cast, clock):
    assert _fail(client, "alice", 5) == [200, 200, 200, 200, 429]
    response = _log_in(client, "alice")
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_an_account_is_locked_whatever_address_the_guesses_come_from(client, cast, clock):
    for n in range(5):
        _fail(client, "alice", 1, ip=f"198.51.100.{n}")
    assert _log_in(client, "alice", ip=ELSEWHERE).status_code == 429


def test_an_address_is_locked_after_its_own_limit_across_accounts(client, cast, clock):
    for username in ("alice", "bob", "victor", "nora"):
        assert _fail(client, username, 4) == [200] * 4  # no account reaches its limit
    # The 20th failure from HOME locks the address: every account is refused from there, even
    # with its password ...
    assert _fail(client, "nobody", 4) == [200, 200, 200, 429]
    assert _log_in(client, "carol").status_code == 429
    # ... and logs in from elsewhere: the accounts themselves are not locked.
    assert _logged_in(_log_in(client, "alice", ip=ELSEWHERE))


def test_the_lockout_ends_after_the_cooloff(client, cast, clock):
    _fail(client, "alice", 5)
    clock.shift(timedelta(minutes=14))
    assert _log_in(client, "alice").status_code == 429
    # Attempts during the lockout do not prolong it: 15 minutes after the fifth failure.
    clock.shift(timedelta(minutes=1, seconds=1))
    assert _logged_in(_log_in(client, "alice"))


def test_a_login_forgets_the_accounts_own_typos(client, cast, clock):
    _fail(client, "alice", 4)
    assert _logged_in(_log_in(client, "alice"))
    client.logout()
    assert _fail(client, "alice", 4) == [200] * 4
    assert _logged_in(_log_in(client, "alice"))


def test_logging_in_to_ones_own_account_does_not_reset_guesses_at_another(client, cast, clock):
    # bob, from the same address, logs in between guesses at alice's password.
    for _ in range(2):
        _fail(client, "alice", 3)
        assert _logged_in(_log_in(client, "bob"))
        client.logout()
    assert _log_in(client, "alice").status_code == 429


def test_behind_a_proxy_the_address_is_the_one_the_proxy_saw(client, cast, clock, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    for n in range(20):
        # The client makes up X-Forwarded-For; the proxy appends the address it saw.
        forwarded = f"192.0.2.{n}, {ELSEWHERE}"
        _log_in(client, f"user{n}", "wrong", ip="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    proxy = "10.0.0.2"
    assert _log_in(client, "alice", ip=proxy, HTTP_X_FORWARDED_FOR=ELSEWHERE).status_code == 429
    assert _logged_in(_log_in(client, "alice", ip=proxy, HTTP_X_FORWARDED_FOR=HOME))


@pytest.mark.parametrize(
    ("proxies", "meta", "expected"),
    [
        (0, {"REMOTE_ADDR": HOME, "HTTP_X_FORWARDED_FOR": "192.0.2.1"}, HOME),
        (1, {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "192.0.2.1, " + HOME}, HOME),
        (2, {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": f"{HOME}, 10.0.0.3"}, HOME),
        (1, {"REMOTE_ADDR": "10.0.0.2"}, "10.0.0.2"),  # did not come through the proxy
        (1, {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "not-an-ip"}, "10.0.0.2"),
    ],
)
def test_the_client_address(settings, proxies, meta, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    assert client_ip(RequestFactory().post("/accounts/login/", **meta)) == expected


def test_a_lockout_is_audited_once(client, cast, clock):
    _fail(client, "alice", 5)
    _fail(client, "alice", 3)
    _log_in(client, "alice")
    entry = AuditEntry.objects.get(action="login.lockout")
    assert entry.actor is None and entry.team is None and entry.at == START
    assert entry.after == {
        "username": "alice",
        "ip_address": HOME,
        "account_failures": 5,
        "address_failures": 5,
    }


def test_a_platform_admin_unlocks_an_account_in_the_admin_and_it_is_audited(client, cast, clock):
    _fail(client, "alice", 5)
    admin = cast.platform_admin
    client.force_login(admin)
    changelist = reverse("admin:axes_accessattempt_changelist")
    page = client.get(changelist)
    assert page.status_code == 200 and "alice" in page.content.decode()
    rows = list(AccessAttempt.objects.filter(username="alice").values_list("pk", flat=True))
    response = client.post(changelist, {"action": "unlock_accounts", "_selected_action": rows})
    assert response.status_code == 302
    client.logout()
    assert _logged_in(_log_in(client, "alice"))
    entry = AuditEntry.objects.get(action="login.unlock")
    assert entry.actor == admin and entry.object_id == "alice"
    assert entry.before == {"username": "alice", "failures": 5} and entry.after == {}


def test_a_platform_admin_unlocks_an_address(client, cast, clock):
    for username in ("bob", "victor", "nora", "nobody", "x"):
        _fail(client, username, 4)
    login_lockout_reset(actor=cast.platform_admin, ip_address=HOME, now=START)
    assert _logged_in(_log_in(client, "carol"))
    entry = AuditEntry.objects.get(action="login.unlock")
    assert entry.object_id == HOME and entry.before == {"ip_address": HOME, "failures": 20}


@pytest.mark.parametrize("who", ["team_admin", "researcher"])
def test_only_platform_admins_unlock(client, cast, clock, who):
    _fail(client, "alice", 5)
    with pytest.raises(ActionNotAllowed):
        login_lockout_reset(actor=getattr(cast, who), username="alice", now=START)
    client.force_login(getattr(cast, who))
    response = client.get(reverse("admin:axes_accessattempt_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert AccessAttempt.objects.filter(username="alice").exists()


def _without_csrf_token(body: str) -> str:
    """The page without its CSRF tokens, which differ on every render."""
    body = re.sub(r'"X-CSRFToken": "[^"]*"', "", body)
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", body)


def test_a_lockout_says_the_same_for_an_account_that_does_not_exist(client, cast, clock):
    UserFactory(username="dave")
    _fail(client, "dave", 5, ip="198.51.100.1")
    _fail(client, "nobody-here", 5, ip="198.51.100.2")
    known = _log_in(client, "dave", ip="198.51.100.1")
    unknown = _log_in(client, "nobody-here", ip="198.51.100.2")
    assert known.status_code == unknown.status_code == 429
    assert _without_csrf_token(known.content.decode()) == _without_csrf_token(
        unknown.content.decode()
    )


@pytest.mark.parametrize(
    "username, password",
    [("u" * 10_000, "wrong"), ("alice\x1b[2J", "wrong"), ("alice", "p" * 100_000)],
)
def test_an_impossible_login_is_a_form_error_not_counted(client, username, password):
    UserFactory(username="alice")
    response = client.post(reverse("login"), {"username": username, "password": password})
    assert response.status_code == 200
    assert "Ensure this value has at most" in response.content.decode() or (
        "printable" in response.content.decode()
    )
    assert not AccessAttempt.objects.exists()  # no name that could be an account is stored
