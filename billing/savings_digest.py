"""The weekly right-sizing digest: each team's admins are told what the team could save a
month (billing.savings, the figure of the Savings page) and its largest savings, through
teams' notices (in-app and email, as budget alerts are), with times in the team's time zone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.contrib.auth.models import User
from django.urls import reverse

from billing.models import Recommendation
from billing.savings import Savings, savings_of_teams, team_savings_list
from common.words import usd
from notifications.models import WebhookEvent
from notifications.notice_text import mark
from notifications.notices import notice_send
from notifications.webhooks import webhook_event_emit
from teams.models import Membership, Role, Team
from teams.selectors import team_timezones

TOP = 5  # savings named in the digest
CENT = Decimal("0.01")


def savings_digest_send(*, now: datetime) -> list[int]:
    """Beat, weekly: tell the active team admins of every team with a saving; returns the
    ids of the teams told. A constant number of queries per team told."""
    team_ids = list(
        Recommendation.objects.filter(saving_usd_month__gt=0)
        .values_list("team_id", flat=True)
        .distinct()
        .order_by("team_id")
    )
    totals = savings_of_teams(team_ids=team_ids)
    zones = team_timezones(team_ids=team_ids)
    admins: dict[int, list[User]] = {t: [] for t in team_ids}
    memberships = Membership.objects.filter(
        team_id__in=team_ids, role=Role.TEAM_ADMIN, user__is_active=True
    ).select_related("user")
    for m in memberships:
        admins[m.team_id].append(m.user)
    told = []
    for team in Team.objects.filter(pk__in=[t for t in team_ids if admins[t]]).order_by("pk"):
        subject = f"{team.name} could save {usd(totals[team.pk].usd_month)} a month"
        text = digest_text(team, totals[team.pk], now, zones[team.pk])
        link = reverse("team-savings", kwargs={"slug": team.slug})
        notice_send(
            users=admins[team.pk],
            subject=subject,
            text=text,
            link=link,
            now=now,
            expires_at=now + timedelta(days=7),  # the next digest replaces it
            zone=zones[team.pk].key,
        )
        data = {
            "saving_usd_month": str(totals[team.pk].usd_month.quantize(CENT)),
            "workspaces": totals[team.pk].workspaces,
        }
        webhook_event_emit(
            team_id=team.pk, event=WebhookEvent.RECOMMENDATION, title=subject, text=text,
            link=link, data=data, now=now,
        )  # fmt: skip
        told.append(team.pk)
    return told


def digest_text(team: Team, savings: Savings, now: datetime, zone: ZoneInfo) -> str:
    """The digest's text: the total, then the TOP largest savings, one a line. The day is
    the team's (``zone``); the time a mark, shown in each reader's zone."""
    lines = [
        f"Right-sizing {savings.workspaces} of {team.name}'s workspaces would save "
        f"{usd(savings.usd_month)} a month (as of {now.astimezone(zone):%-d %b %Y} {mark(now)}):"
    ]
    top = team_savings_list(team=team).filter(saving_usd_month__gt=0)[:TOP]
    for r in top:
        target = r.target or "Spot"
        lines.append(
            f"- {r.workspace.name}: {r.get_advice_display()} ({target}), "
            f"{usd(r.saving_usd_month)} a month"
        )
    return "\n".join(lines)
