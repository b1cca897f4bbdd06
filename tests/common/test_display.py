"""The one money filter, the one time rule and labels in words, as every page renders them."""

import zoneinfo
from datetime import UTC, date, datetime
from decimal import Decimal
from fractions import Fraction

import pytest
from django.template import Context, Template
from django.utils import timezone

from common import words
from teams.models import Decision, Role, TeamQuotaIncrease
from workspaces.backends import backends
from workspaces.states import STYLE, Status, event_style


def _render(source: str, **context) -> str:
    return Template(source).render(Context(context))


@pytest.mark.parametrize(
    ("amount", "places", "shown"),
    [
        (Decimal("5000"), 2, "$5,000.00"),
        (Decimal("1234567.891"), 2, "$1,234,567.89"),
        (Decimal("0.5247"), 4, "$0.5247"),
        (Decimal("0.02745"), 3, "$0.027"),
        (Decimal("-3.6"), 2, "-$3.60"),
        (Decimal("-0.001"), 2, "$0.00"),
        (7, 2, "$7.00"),
        (None, 2, ""),
        ("n/a", 2, ""),
    ],
)
def test_every_template_shows_money_one_way(amount, places, shown):
    assert _render("{{ a|usd:p }}", a=amount, p=places) == shown
    assert words.usd(amount, places) == shown


def test_the_old_money_library_gives_the_same_filter():
    assert _render("{% load money %}{{ a|usd }}", a=Decimal("5000")) == "$5,000.00"


def test_an_increase_request_reads_with_the_one_money_format_and_plural(cast):
    ask = TeamQuotaIncrease(team=cast.team, gpu_model="A100", gpus=1, monthly_budget=5000)
    assert ask.summary == "Vision Lab: 1 A100 GPU and a budget of $5,000.00/month"


AT = datetime(2026, 11, 24, 7, 45, 12, tzinfo=UTC)


def test_a_time_is_shown_in_the_users_zone_with_utc_on_hover():
    with timezone.override(zoneinfo.ZoneInfo("Europe/Berlin")):
        html = _render("{% when at %}", at=AT)
    assert html == (
        '<time datetime="2026-11-24T07:45:12Z" title="2026-11-24 07:45 UTC">'
        "24 Nov 2026 08:45 CET</time>"
    )


@pytest.mark.parametrize(
    ("style", "text"),
    [
        ("seconds", "24 Nov 2026 02:45:12 EST"),
        ("short", "24 Nov 02:45 EST"),
        ("time", "02:45 EST"),
        ("time_seconds", "02:45:12 EST"),
        ("no-such-style", "24 Nov 2026 02:45 EST"),
    ],
)
def test_each_time_style_names_its_zone(style, text):
    with timezone.override(zoneinfo.ZoneInfo("America/New_York")):
        html = _render("{% when at style %}", at=AT, style=style)
    assert html.endswith(f">{text}</time>")
    assert 'title="2026-11-24 07:45 UTC"' in html


@pytest.mark.parametrize(
    ("at", "text"),
    [  # 25 Oct 2026, Berlin: 02:00-03:00 happens twice, first in summer time
        (datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "25 Oct 2026 02:30 CEST"),
        (datetime(2026, 10, 25, 1, 30, tzinfo=UTC), "25 Oct 2026 02:30 CET"),
        (datetime(2027, 3, 28, 1, 30, tzinfo=UTC), "28 Mar 2027 03:30 CEST"),
    ],
)
def test_the_hour_the_clocks_go_back_says_which_of_its_two_times_it_is(at, text):
    with timezone.override(zoneinfo.ZoneInfo("Europe/Berlin")):
        assert _render("{% when at %}", at=at).endswith(f">{text}</time>")


def test_a_missing_time_shows_nothing_and_a_naive_one_is_utc():
    assert _render("{% when at %}", at=None) == ""
    with timezone.override(zoneinfo.ZoneInfo("Asia/Tokyo")):
        html = _render("{% when at 'time' %}", at=AT.replace(tzinfo=None))
    assert html.endswith(">16:45 JST</time>")


def test_a_calendar_day_is_not_shifted_by_the_zone():
    with timezone.override(zoneinfo.ZoneInfo("Pacific/Kiritimati")):
        html = _render("{% when day 'date' %}", day=date(2026, 11, 30))
    assert html == '<time datetime="2026-11-30">30 Nov 2026</time>'


@pytest.mark.parametrize(
    ("word", "with_article"),
    [
        ("A100", "an A100"),
        ("H100", "an H100"),
        ("A10", "an A10"),
        ("T4", "a T4"),
        ("V100", "a V100"),
        ("MIG slice", "an MIG slice"),
        ("GPU VM", "a GPU VM"),
        ("hour", "an hour"),
        ("idle workspace", "an idle workspace"),
        ("namespace", "a namespace"),
        ("user", "a user"),
    ],
)
def test_articles_go_by_how_the_word_is_spoken(word, with_article):
    assert words.with_article(word) == with_article
    assert _render("{{ w|with_article }}", w=word) == with_article


@pytest.mark.parametrize(
    ("number", "noun", "text"),
    [
        (1, "GPU", "1 GPU"),
        (0, "GPU", "0 GPUs"),
        (2, "GPU", "2 GPUs"),
        (Fraction(3, 7), "A100 GPU", "3/7 A100 GPU"),
        (Fraction(10, 7), "GPU", "1 3/7 GPUs"),
        (1, "child,children", "1 child"),
        (3, "child,children", "3 children"),
    ],
)
def test_counts_agree_with_their_noun(number, noun, text):
    assert _render("{{ n|counted:noun }}", n=number, noun=noun) == text


def test_every_status_kind_decision_and_role_has_a_word_label():
    kinds = [backend.kind for backend in backends()]
    for values in (Status.values, kinds, Decision.values, Role.values):
        for value in values:
            shown = _render("{{ v|label }}", v=value)
            assert shown and "_" not in shown and shown[0].isupper(), (value, shown)
    assert _render("{{ v|label }}", v="mig") == "MIG slice"  # its backend's label
    assert _render("{{ v|label }}", v="pending_approval") == "Pending approval"
    assert _render("{{ v|label }}", v="quota_request.approved") == "Quota request approved"
    assert _render("{{ v|label }}", v="A100") == "A100"
    assert all(style.label for style in STYLE.values())


def test_a_request_closed_unapproved_reads_rejected_or_expired_not_deleted():
    def shown(detail, by_person):
        return event_style(
            from_status=Status.PENDING_APPROVAL,
            to_status=Status.DELETED,
            detail=detail,
            by_person=by_person,
        ).label

    assert shown({"outcome": "rejected"}, by_person=True) == "Rejected"
    assert shown({"outcome": "expired"}, by_person=False) == "Expired"
    assert shown({}, by_person=True) == "Rejected"  # written before outcomes were recorded
    running_deleted = event_style(
        from_status=Status.DELETING, to_status=Status.DELETED, detail={}, by_person=True
    )
    assert running_deleted.label == "Deleted"


@pytest.mark.django_db
def test_the_requester_sees_rejected_in_words_on_the_workspace_page(client, cast):
    from django.urls import reverse

    from teams.quota_requests import quota_request_reject
    from tests.workspaces.test_quota import _request, _set_a100_quota

    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    quota_request_reject(
        quota_request_id=ws.quota_request.pk,
        actor=cast.platform_admin,
        comment="use T4",
        now=timezone.now(),
    )
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    panel = page.split('id="status-panel"')[1]
    assert ">Rejected</span>" in panel and ">Deleted</span>" not in panel
    assert "Pending approval →" in panel and "pending_approval" not in panel


def test_the_all_teams_chart_shows_the_top_teams_and_sums_the_others():
    from types import SimpleNamespace

    from billing.overview import SpendOverview, TeamMonth, spend_overview_chart

    def month(name, spent, forecast, budget=None):
        team = SimpleNamespace(name=name)
        return TeamMonth(team, Decimal(spent), budget, None, Decimal(0), Decimal(forecast), None)

    overview = SpendOverview(
        teams=[month("a", 10, 30, Decimal(100)), month("b", 5, 50), month("c", 1, 2)],
        spent=Decimal(16),
        forecast=Decimal(82),
        workspaces=[],
    )
    chart = spend_overview_chart(overview=overview, top=1)
    assert chart["teams"] == ["b", "2 other teams"]
    assert chart["spent"] == ["5.00", "11.00"] and chart["rest"] == ["45.00", "21.00"]
    assert chart["budget"] == [None, None]
