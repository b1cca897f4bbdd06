"""Reads of teams, always scoped to the user asking."""

from collections.abc import Collection
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import BooleanField, Count, ExpressionWrapper, Q, QuerySet
from django.http import QueryDict

from common.listing import DEFAULT_PAGE_SIZE, KeysetPage, keyset_page, sort_from
from common.permissions import Actor
from teams.filters import AuditFilter
from teams.models import (
    AuditEntry,
    BudgetAlert,
    Decision,
    IdlePolicy,
    Membership,
    Role,
    Team,
    TeamQuotaIncrease,
)
from teams.rules import is_platform_admin, platform_admin_q


def platform_admins() -> list[User]:
    """Every platform admin (teams.rules.platform_admin_q). One query."""
    return list(get_user_model().objects.filter(platform_admin_q()))


def team_visible_to(*, user: Actor) -> QuerySet[Team]:
    """Teams the user may see: all for a platform admin, else the user's own teams."""
    if not user.is_authenticated:
        return Team.objects.none()
    if is_platform_admin(user):
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user).distinct()


def team_list_for_requests(*, user: Actor) -> QuerySet[Team]:
    """Teams in which the user may request workspaces: those the user is a member of."""
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).distinct()


def membership_role(*, user: User, team: Team) -> str | None:
    """The user's role in the team ("researcher" | "team_admin"), or None if not a member."""
    return Membership.objects.filter(user=user, team=team).values_list("role", flat=True).first()


def team_get(*, user: Actor, slug: str) -> Team:
    """The team with ``slug`` among those visible to the user; Team.DoesNotExist otherwise
    (a view turns it into 404, so a stranger cannot tell whether the team exists)."""
    return team_visible_to(user=user).get(slug=slug)


def team_members(*, team: Team) -> QuerySet[Membership]:
    """The team's memberships with their users: team admins first, then by username. Each has
    ``from_entra``: True when the team is linked to a group and the user signs in with Entra
    ID, so the membership follows the group (teams.memberships refuses to change it);
    ``entra_account``: True when the user signs in with Entra ID, False for a local account
    (or a service account)."""
    from_entra = (
        Q(user__profile__signin_object_id__isnull=False)
        & Q(user__profile__service_account=False)
        & Q(team__entra_group_id__isnull=False)
    )
    signs_in_with_entra = Q(user__profile__signin_object_id__isnull=False) & Q(
        user__profile__service_account=False
    )
    return (
        Membership.objects.filter(team=team)
        .select_related("user")
        .annotate(
            from_entra=ExpressionWrapper(from_entra, output_field=BooleanField()),
            entra_account=ExpressionWrapper(signs_in_with_entra, output_field=BooleanField()),
        )
        .order_by("-role", "user__username")
    )


def team_member_count(*, team_ids: Collection[int]) -> dict[int, int]:
    """Members per team, the one definition every page shows ({team_id: int}, every team
    present). What counts: the team's memberships, researchers and team admins alike; a
    platform admin (staff) is a member only where a membership says so. The team page lists
    exactly these (team_members). One query whatever the number of teams."""
    counts = dict(
        Membership.objects.filter(team_id__in=list(team_ids))
        .values("team_id")
        .annotate(n=Count("pk"))
        .values_list("team_id", "n")
    )
    return {t: counts.get(t, 0) for t in team_ids}


def team_increases_pending(*, team: Team | None = None) -> list[TeamQuotaIncrease]:
    """Pending increase requests, oldest first, with team and requester; one query.
    All teams' for the approvals page (platform admins), or one team's for its page."""
    qs = TeamQuotaIncrease.objects.filter(decision=Decision.PENDING)
    if team is not None:
        qs = qs.filter(team=team)
    return list(qs.select_related("team", "requester").order_by("created_at"))


def audit_visible_to(*, user: Actor) -> QuerySet[AuditEntry]:
    """Audit rows the user may read: all for a platform admin, else those of the teams the
    user is team admin of (none for a researcher)."""
    if not user.is_authenticated:
        return AuditEntry.objects.none()
    if is_platform_admin(user):
        return AuditEntry.objects.all()
    admin_of = Membership.objects.filter(user=user, role=Role.TEAM_ADMIN).values("team_id")
    return AuditEntry.objects.filter(team_id__in=admin_of)


def audit_page(
    *, user: Actor, params: QueryDict, size: int = DEFAULT_PAGE_SIZE
) -> tuple[AuditFilter, KeysetPage]:
    """(filters, page): the user's visible audit rows, newest first, with actor and team
    loaded, filtered by the query string ``params`` (teams.filters.AuditFilter: team slug,
    actor username, action prefix), oldest first with ``sort=at``, and paged by keyset after
    ``cursor``
    (common.listing.KeysetPage). One query for the rows however many there are."""
    filters = AuditFilter(
        params, queryset=audit_visible_to(user=user).select_related("actor", "team")
    )
    sort = sort_from(params.get("sort"), allowed={"at": "at"}, default="-at")
    return filters, keyset_page(filters.qs, sort=sort, cursor=params.get("cursor"), size=size)


def audit_filter_choices(*, user: Actor) -> dict[str, list[Any]]:
    """Values offered by the audit page's filters: teams as (slug, name), by name, and
    actions (the actor is typed: an organisation's thousands of usernames would weigh the
    page down)."""
    qs = audit_visible_to(user=user)
    teams = team_visible_to(user=user).order_by("name", "slug")
    return {
        "teams": list(teams.values_list("slug", "name")),
        # order_by: the model's default order (at, id) would make DISTINCT keep every row.
        "actions": list(qs.order_by("action").values_list("action", flat=True).distinct()),
    }


def team_timezones(*, team_ids: Collection[int]) -> dict[int, ZoneInfo]:
    """Each team's time zone: its idle policy's, else UTC; the zone of its month and days
    (budgets, spend, alerts). One query."""
    zones = dict(IdlePolicy.objects.filter(team_id__in=team_ids).values_list("team_id", "timezone"))
    return {t: ZoneInfo(zones.get(t) or "UTC") for t in team_ids}


def team_months(*, team_ids: Collection[int], now: datetime) -> dict[int, date]:
    """The 1st of each team's month at ``now``, in the team's time zone (team_timezones).
    One query."""
    zones = team_timezones(team_ids=list(team_ids))
    return {t: now.astimezone(zone).date().replace(day=1) for t, zone in zones.items()}


def budget_alerts_of(*, months: dict[int, date]) -> dict[int, dict[int, BudgetAlert]]:
    """The budget alerts already recorded for each team's month ``{team_id: 1st of month}``,
    as {team_id: {threshold percent: BudgetAlert}} (every team present). One query."""
    query = Q(pk__in=[])
    for team_id, month in months.items():
        query |= Q(team_id=team_id, month=month)
    alerts: dict[int, dict[int, BudgetAlert]] = {t: {} for t in months}
    for alert in BudgetAlert.objects.filter(query) if months else []:
        alerts[alert.team_id][alert.threshold] = alert
    return alerts


def budget_alert_list(
    *, team: Team, month: date | None = None, now: datetime | None = None
) -> list[BudgetAlert]:
    """The team's budget alerts of the month starting ``month`` (or of its month at ``now``),
    lowest threshold first: what its team page and spend page show."""
    if month is None:
        if now is None:
            raise TypeError("budget_alert_list needs month or now")
        month = team_months(team_ids=[team.pk], now=now)[team.pk]
    return list(BudgetAlert.objects.filter(team=team, month=month).order_by("threshold"))
