"""Hostile input never gets a 500: every URL of the URL conf, and every admin changelist,
is sent a table of hostile values in each query parameter and form field it reads.

Which parameters a view reads is not listed by hand (a list would go stale): a first,
well-formed request records every key the view looks up in ``request.GET`` or
``request.POST`` (forms read their fields the same way), then each of those keys gets each
hostile value in turn, the other keys keeping their well-formed values, and once more all of
them at once (so a pair such as start=end=9999-12-31 is tried too). Each request's writes
are rolled back, so a POST that decides or deletes something is tried anew with every value.
Each URL is requested as the member of the cast with the most access to it. A streamed
answer (CSV) is read to its end, since a stream that breaks half-way is a 500 the client
sees as a cut-off file.

The heartbeat endpoint takes JSON, not parameters: tests/workspaces/test_heartbeat.py covers
its body.
"""

from contextlib import contextmanager
from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.db import transaction
from django.http import QueryDict
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.datastructures import MultiValueDict

from tests.portal.test_rbac_matrix import EXPECTED, ROLES, URLS, _url, objects, row_data  # noqa: F401

HOSTILE = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\x1b[2J",
    "\r\n",
    "\u202e",
    "\ufeff",
    "\U0001f600",
    "x" * 10_000,
    "9999-12",
    "9999-12-31",
    "0001-01",
    "0001-01-01",
    "0000-00-00",
    "2026-13-45",
    "-1",
    "0",
    "2147483648",
    "99999999999999999999999999",
    "1e309",
    "NaN",
    "Infinity",
    "' OR '1'='1",
    "<script>alert(1)</script>",
    "../../../etc/passwd",
    "%00",
    "[]",
    "null",
)
# URLs whose parameters are not form fields or query strings read by Django's request.
NOT_FUZZED = {"agent-heartbeat", "logout"}
# Django admin changelists read these, and filters by arbitrary field lookups.
ADMIN_PARAMS = ("q", "o", "p", "all", "_to_field", "e")


class _Reads:
    """Keys looked up in any QueryDict while recording (request.GET, request.POST)."""

    keys: set | None = None


_originals = {
    name: getattr(MultiValueDict, name)
    for name in ("get", "getlist", "__getitem__", "__contains__")
}


def _recording(name):
    original = _originals[name]

    def method(self, key, *args, **kwargs):
        if _Reads.keys is not None and isinstance(self, QueryDict) and isinstance(key, str):
            _Reads.keys.add(key)
        return original(self, key, *args, **kwargs)

    return method


@contextmanager
def _record_reads(monkeypatch):
    for name in _originals:
        monkeypatch.setattr(MultiValueDict, name, _recording(name))
    _Reads.keys = set()
    try:
        yield _Reads.keys
    finally:
        _Reads.keys = None
        for name, original in _originals.items():
            monkeypatch.setattr(MultiValueDict, name, original)


class _FormDefaults(HTMLParser):
    """Field values a browser would post from the page's forms: inputs' values, the
    selected (or first) option of each select, and textareas' text."""

    def __init__(self):
        super().__init__()
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("checkbox", "radio", "submit"):
            self.values.setdefault(name, a.get("value") or "")
        elif tag == "input" and name and "checked" in a:
            self.values[name] = a.get("value") or "on"
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select:
            if self._select not in self.values or "selected" in a:
                self.values[self._select] = a.get("value") or ""
        elif tag == "textarea" and name:
            self._textarea = name
            self.values.setdefault(name, "")

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            self.values[self._textarea] += data


def _best_role(row) -> str:
    """The member of the cast who gets furthest: a team admin where allowed, else the
    platform admin (whose own pages a team admin cannot see)."""
    for role in ("team_admin", "researcher", "platform_admin"):
        if row.statuses[ROLES.index(role)] in (200, 302):
            return role
    return "platform_admin"


def _status(response) -> int:
    """The status a client sees; a stream that raises half-way counts as a 500."""
    if response.streaming:
        try:
            b"".join(response.streaming_content)
        except Exception:
            return 500
    return response.status_code


def _page_defaults(client, url) -> dict:
    parser = _FormDefaults()
    response = client.get(url)
    if response.status_code == 200 and not response.streaming:
        parser.feed(response.content.decode(errors="replace"))
    parser.values.pop("csrfmiddlewaretoken", None)
    return parser.values


def _fuzz(client, method: str, url: str, base: dict, keys) -> tuple[int, list[str]]:
    """Send every hostile value in each key, then in all keys at once; returns how many
    requests were sent and the ones that got a 500."""
    send = client.post if method == "POST" else client.get
    tried, failures = 0, []
    variants = [{key: value} for key in sorted(keys) for value in HOSTILE]
    variants += [dict.fromkeys(keys, value) for value in HOSTILE]
    for variant in variants:
        tried += 1
        # Each variant starts from the same rows: what one stored (or half-stored, where a
        # database error broke its transaction) is rolled back before the next.
        with transaction.atomic():
            status = _status(send(url, {**base, **variant}))
            transaction.set_rollback(True)
        if status >= 500:
            failures.append(f"{method} {url} {variant!r:.120}")
    return tried, failures


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(set(URLS) - NOT_FUZZED))
def test_hostile_parameters_never_get_a_500(cast, objects, monkeypatch, name):  # noqa: F811
    row = EXPECTED[name]
    client = Client(raise_request_exception=False)
    client.force_login(getattr(cast, _best_role(row)))
    url = _url(name, URLS[name], row, objects)
    base = row_data(row, objects)
    methods = ["GET", "POST"] if row.method == "GET" else ["POST"]
    for method in methods:
        if method == "POST" and row.method == "GET":
            base = {**_page_defaults(client, url), **base}
        send = client.post if method == "POST" else client.get
        with _record_reads(monkeypatch) as keys, transaction.atomic():
            first = send(url, base)
            transaction.set_rollback(True)
        if first.status_code == 405:
            continue
        assert _status(first) < 500, f"{method} {url} with well-formed data"
        tried, failures = _fuzz(client, method, url, base, keys | set(base))
        assert tried
        assert not failures, "\n".join(failures)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model", sorted(admin.site._registry, key=lambda m: m._meta.label), ids=str
)
def test_admin_changelists_take_hostile_parameters(cast, model):
    client = Client(raise_request_exception=False)
    client.force_login(cast.platform_admin)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    tried, failures = _fuzz(client, "GET", url, {}, ADMIN_PARAMS)
    assert not failures, "\n".join(failures)


# The review's cases by name, so each shows as its own failure.
@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, query",
    [
        ("team-spend", "month=9999-12"),
        ("team-spend-data", "month=9999-12"),
        ("team-spend-reconciliation", "month=9999-12"),
        ("team-spend", "month=0001-01"),
        ("team-spend-csv", "start=9999-12-30&end=9999-12-31"),
        ("team-spend-csv", "start=0001-01-01&end=0001-01-02"),
        ("platform-spend-csv", "start=9999-12-30&end=9999-12-31"),
        ("audit", "team=%00"),
        ("audit", "actor=%00"),
        ("audit", "action=%00"),
        ("audit", "actor=a%1Bb"),
    ],
)
def test_out_of_range_dates_and_control_characters_get_400(cast, name, query):
    client = Client(raise_request_exception=False)
    client.force_login(cast.platform_admin if name.startswith("platform") else cast.team_admin)
    kwargs = {"slug": cast.team.slug} if name.startswith("team-") else {}
    response = client.get(f"{reverse(name, kwargs=kwargs)}?{query}")
    assert _status(response) == 400
    text = response.content.decode()
    assert "2000" in text or "printable" in text  # the error says what is allowed


@pytest.mark.django_db
@pytest.mark.parametrize("target", ["9999-12", "' OR '1'='1", "\U0001f600", "a\x00b"])
def test_dismissing_a_notice_with_a_bad_next_goes_home(client, cast, target):
    from notifications.models import Notice

    notice = Notice.objects.create(user=cast.researcher, text="hi", created_at=timezone.now())
    client.force_login(cast.researcher)
    response = client.post(reverse("notice-dismiss", args=[notice.pk]), {"next": target})
    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    notice.refresh_from_db()
    assert notice.read_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize("comment", ["a\x00b", "\x1b[2J"])
def test_a_decision_comment_with_control_characters_decides_nothing(cast, objects, comment):  # noqa: F811
    client = Client(raise_request_exception=False)
    client.force_login(cast.platform_admin)
    pending = objects["quota_request"]
    response = client.post(
        reverse("approval-decide", args=[pending.pk, "reject"]), {"comment": comment}
    )
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.decision == "pending"
    page = client.get(reverse("approvals")).content.decode()
    assert "Comment: " in page  # the form error, shown as a message
