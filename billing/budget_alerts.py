"""Budget alerts: each team told at 50, 80 and 100 % of its monthly budget (USD, its time
zone's month), once per threshold per month, with the stop at 100 % of its running
workspaces when the team asks for it. Billing's, as the spend it measures
(billing.month_spend.team_spend); the alerts are stored in teams.models.BudgetAlert and told
through teams' notices.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse

from billing.month_spend import team_spend
from common.months import month_bounds
from common.words import usd
from notifications.models import NoticeKind, WebhookEvent
from notifications.notices import notice_about, notice_send
from notifications.webhooks import webhook_event_emit
from teams.models import ALERT_THRESHOLDS, BudgetAlert, Membership, Role, Team
from teams.selectors import budget_alerts_of, platform_admins, team_months, team_timezones
from workspaces.actions import workspace_stop_automatically
from workspaces.selectors import workspace_running_begun_by


@dataclass
class AlertCheck:
    """What one budget_alerts_check did: ``evaluated`` teams with a budget, ``sent`` as
    (team_id, [thresholds]) per message, ``stopped`` workspace ids."""

    evaluated: int = 0
    sent: list = field(default_factory=list)
    stopped: list = field(default_factory=list)


def _thresholds_reached(*, spent: Decimal, budget: Decimal) -> list[int]:
    """The ALERT_THRESHOLDS (percent) that ``spent`` (USD) has reached of ``budget`` (USD).
    Nothing spent reaches nothing, even of a $0 budget."""
    if spent <= 0:
        return []
    return [t for t in ALERT_THRESHOLDS if spent * 100 >= budget * t]


def budget_alerts_check(*, now: datetime) -> AlertCheck:
    """Beat, every SPEND_ALERT_SECONDS: tell each team whose month-to-date spend reached 50,
    80 or 100 % of its monthly budget (its time zone's month; billing.month_spend.team_spend),
    once per threshold per month, and with the team's ``stop_at_budget`` on stop its running
    workspaces at 100 %. Spend jumping over several thresholds records each and sends one
    message naming them all. A constant number of queries for any number of teams, plus the
    writes of what it sends or stops."""
    teams = list(Team.objects.filter(monthly_budget__isnull=False).order_by("pk"))
    ids = [t.pk for t in teams]
    spend = team_spend(team_ids=ids, now=now)
    months = team_months(team_ids=ids, now=now)
    sent = budget_alerts_of(months=months)
    result = AlertCheck(evaluated=len(teams))
    due = {}
    for team in teams:
        reached = _thresholds_reached(spent=spend[team.pk].spent, budget=team.monthly_budget)
        if missing := [t for t in reached if t not in sent[team.pk]]:
            due[team.pk] = missing
    recipients = _alert_recipients(team_ids=list(due))
    for team in teams:
        if team.pk in due:
            alert = BudgetAlertSend(team, months[team.pk], due[team.pk], spend[team.pk].spent)
            stopped = _budget_alert_send(alert, recipients[team.pk], now)
            if stopped is not None:
                result.sent.append((team.pk, due[team.pk]))
                result.stopped += stopped
    result.stopped += _budget_stop_late(teams, spend, sent, now)
    return result


@dataclass(frozen=True)
class BudgetAlertSend:
    """One team's alert about to be sent: its month (1st), thresholds (percent), USD spent."""

    team: Team
    month: date
    thresholds: list
    spent: Decimal


def _alert_recipients(*, team_ids: list[int]) -> dict[int, list]:
    """Each team's admins and every platform admin, active, each user once. Two queries."""
    if not team_ids:
        return {}
    staff = platform_admins()
    admins = Membership.objects.filter(
        team_id__in=team_ids, role=Role.TEAM_ADMIN, user__is_active=True
    ).select_related("user")
    users = {t: {u.pk: u for u in staff} for t in team_ids}
    for membership in admins:
        users[membership.team_id].setdefault(membership.user_id, membership.user)
    return {t: list(found.values()) for t, found in users.items()}


def _budget_alert_send(alert: BudgetAlertSend, users: list, now: datetime) -> list | None:
    """Insert the alert's rows, stop the team's running workspaces if it reached 100 % with
    stop_at_budget on, and tell ``users`` (emails after commit): the workspace ids stopped,
    or None when another check inserted a row first (the unique constraint; it sends)."""
    team = alert.team
    try:
        with transaction.atomic():
            rows = [
                BudgetAlert.objects.create(
                    team=team,
                    month=alert.month,
                    threshold=t,
                    spent=alert.spent,
                    budget=team.monthly_budget,
                    sent_at=now,
                )
                for t in alert.thresholds  # ascending, so two checks lock in the same order
            ]
            stopped = []
            if ALERT_THRESHOLDS[-1] in alert.thresholds and team.stop_at_budget:
                running = workspace_running_begun_by(cutoffs={team.pk: now})
                stopped = _budget_stop(team, rows[-1], running, alert.spent, now)
            _alert_tell(alert, users, _alert_text(alert, stopped), now)
    except IntegrityError:
        return None
    return [w["pk"] for w in stopped]


def _alert_text(alert: BudgetAlertSend, stopped: list[dict]) -> str:
    team, budget = alert.team, alert.team.monthly_budget
    marks = [f"{t}%" for t in alert.thresholds]
    passed = marks[0] if len(marks) == 1 else f"{', '.join(marks[:-1])} and {marks[-1]}"
    text = (
        f"{team.name} passed {passed} of its {alert.month:%B} budget: "
        f"{usd(alert.spent)} of {usd(budget)} spent."
    )
    if ALERT_THRESHOLDS[-1] not in alert.thresholds:
        return text
    text += " New workspace requests now wait for a platform admin's approval."
    if team.stop_at_budget and stopped:
        names = ", ".join(w["name"] for w in stopped)
        text += f" Stop at 100% is on, so these running workspaces are being stopped: {names}."
    elif team.stop_at_budget:
        text += " Stop at 100% is on; no workspace was running."
    return text


def _alert_tell(alert: BudgetAlertSend, users: list, text: str, now: datetime) -> None:
    """Notices in the alert's transaction (they exist exactly when it does); the emails, over
    one connection, after it commits."""
    subject = f"{alert.team.name} has spent {alert.thresholds[-1]}% of its {alert.month:%B} budget"
    link = reverse("team-spend", kwargs={"slug": alert.team.slug})
    zone = team_timezones(team_ids=[alert.team.pk])[alert.team.pk]
    month_start = datetime.combine(alert.month, datetime.min.time(), tzinfo=zone)
    notice_send(
        users=users,
        subject=subject,
        text=text,
        link=link,
        now=now,
        kind=NoticeKind.BUDGET,
        about=notice_about(alert.team),
        # About this month's spend: no longer true once the team's month is over.
        expires_at=month_bounds(month_start, zone)[1],
    )
    budget = alert.team.monthly_budget
    data = {
        "month": alert.month.isoformat(),
        "thresholds": list(alert.thresholds),
        "spent_usd": str(alert.spent),
        "budget_usd": str(budget) if budget is not None else None,
    }
    webhook_event_emit(
        team_id=alert.team.pk, event=WebhookEvent.BUDGET, title=subject, text=text, link=link,
        data=data, now=now,
    )  # fmt: skip


def _budget_stop(team, alert, workspaces: list[dict], spent: Decimal, now: datetime) -> list:
    """Stop ``workspaces`` (running, of ``team``) through the same transition and task as an
    idle stop, and count them on the 100 % ``alert``. Those stopped (others moved on)."""
    reason = f"Team budget of {usd(team.monthly_budget)} used up (stop at 100% is on)"
    detail = {
        "rule": "budget",
        "budget_usd": str(team.monthly_budget),
        "spent_usd": str(spent),
        "month": alert.month.isoformat(),
    }
    stopped = [
        w
        for w in workspaces
        if workspace_stop_automatically(workspace_id=w["pk"], reason=reason, detail=detail, now=now)
    ]
    if stopped:
        BudgetAlert.objects.filter(pk=alert.pk).update(stopped=F("stopped") + len(stopped))
    return stopped


def _budget_stop_late(teams, spend, sent, now: datetime) -> list:
    """Teams with stop_at_budget still at or over the budget after an earlier 100 % alert:
    stop what was provisioning or starting then and runs now. A workspace that began to run
    after the alert (a platform admin approved it) is left alone. At most one query."""
    top = ALERT_THRESHOLDS[-1]
    late = {
        t.pk: (t, sent[t.pk][top])
        for t in teams
        if t.stop_at_budget and top in sent[t.pk] and spend[t.pk].spent >= t.monthly_budget
    }
    running = defaultdict(list)
    cutoffs = {team_id: alert.sent_at for team_id, (_, alert) in late.items()}
    for w in workspace_running_begun_by(cutoffs=cutoffs):
        running[w["team_id"]].append(w)
    stopped = []
    for team_id, workspaces in running.items():
        team, alert = late[team_id]
        stopped += _budget_stop(team, alert, workspaces, spend[team_id].spent, now)
    return [w["pk"] for w in stopped]
